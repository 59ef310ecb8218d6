#include "trainer/data_parallel.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace lockstep::trainer {
namespace {

absl::StatusOr<int> ParseIntVariable(const std::string& name, const std::string& text) {
  int value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", name, "='", text, "' is not an integer"));
  }
  return value;
}

// A 62-bit fingerprint of the tensors' dtypes and shapes, in order (FNV-1a over the numbers).
int64_t LayoutFingerprint(const std::vector<torch::Tensor>& tensors) {
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&hash](int64_t value) {
    hash ^= static_cast<uint64_t>(value);
    hash *= 1099511628211ull;
  };
  mix(static_cast<int64_t>(tensors.size()));
  for (const torch::Tensor& tensor : tensors) {
    mix(static_cast<int64_t>(tensor.scalar_type()));
    mix(tensor.dim());
    for (int64_t size : tensor.sizes()) mix(size);
  }
  return static_cast<int64_t>(hash >> 2);
}

// Rank 0 hosts the TCPStore at MASTER_ADDR:MASTER_PORT; every rank connects to it and joins the
// Gloo group under options.store_prefix. DeadlineExceeded when the peers do not all arrive
// within the timeout; Unavailable for other connection failures (with LibTorch's message).
absl::StatusOr<std::unique_ptr<c10d_compat::CollectiveGroup>> JoinProcessGroup(
    const DistributedEnv& env, const DataParallelOptions& options) {
  if (env.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("world_size must be >= 1, got ", env.world_size));
  }
  if (env.rank < 0 || env.rank >= env.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank must be in [0, ", env.world_size, "), got ", env.rank));
  }
  if (env.master_port < 1 || env.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("master_port must be in [1, 65535], got ", env.master_port));
  }
  if (env.master_addr.empty()) return absl::InvalidArgumentError("master_addr is empty");
  if (options.timeout.count() <= 0) return absl::InvalidArgumentError("timeout must be > 0");
  const std::string where = absl::StrCat(env.master_addr, ":", env.master_port);
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10d_compat::PrefixedStore(
        options.store_prefix, c10d_compat::ConnectTcpStore(env.master_addr, env.master_port,
                                                           env.rank == 0, options.timeout));
  } catch (const std::exception& error) {
    return c10d_compat::StatusFromException(
        error, absl::StrCat("TCPStore at ", where, " (rank ", env.rank, ")"));
  }
  try {
    return std::make_unique<c10d_compat::CollectiveGroup>(store, env.rank, env.world_size,
                                                          env.master_addr, options.timeout);
  } catch (const std::exception& error) {
    return c10d_compat::StatusFromException(
        error, absl::StrCat("process group rendezvous at ", where, " (rank ", env.rank, " of ",
                            env.world_size, ")"));
  }
}

}  // namespace

absl::StatusOr<DistributedEnv> ParseDistributedEnv(
    const std::function<std::optional<std::string>(const std::string&)>& lookup) {
  const std::optional<std::string> master_addr = lookup("MASTER_ADDR");
  const std::optional<std::string> master_port = lookup("MASTER_PORT");
  const std::optional<std::string> rank = lookup("RANK");
  const std::optional<std::string> world_size = lookup("WORLD_SIZE");
  DistributedEnv env;
  if (!master_addr && !master_port && !rank && !world_size) return env;  // single rank
  if (!world_size) {
    return absl::InvalidArgumentError(
        "environment variable WORLD_SIZE is not set (RANK/MASTER_* are; set all four)");
  }
  if (!rank) {
    return absl::InvalidArgumentError(
        "environment variable RANK is not set (WORLD_SIZE/MASTER_* are; set all four)");
  }
  absl::StatusOr<int> parsed_world = ParseIntVariable("WORLD_SIZE", *world_size);
  if (!parsed_world.ok()) return parsed_world.status();
  if (*parsed_world < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable WORLD_SIZE must be >= 1, got ", *parsed_world));
  }
  absl::StatusOr<int> parsed_rank = ParseIntVariable("RANK", *rank);
  if (!parsed_rank.ok()) return parsed_rank.status();
  if (*parsed_rank < 0 || *parsed_rank >= *parsed_world) {
    return absl::InvalidArgumentError(absl::StrCat("environment variable RANK must be in [0, ",
                                                   *parsed_world, "), got ", *parsed_rank));
  }
  env.world_size = *parsed_world;
  env.rank = *parsed_rank;
  if (env.world_size == 1 && !master_addr && !master_port) return env;
  if (!master_addr || master_addr->empty()) {
    return absl::InvalidArgumentError("environment variable MASTER_ADDR is not set");
  }
  if (!master_port)
    return absl::InvalidArgumentError("environment variable MASTER_PORT is not set");
  absl::StatusOr<int> parsed_port = ParseIntVariable("MASTER_PORT", *master_port);
  if (!parsed_port.ok()) return parsed_port.status();
  if (*parsed_port < 1 || *parsed_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable MASTER_PORT must be in [1, 65535], got ", *parsed_port));
  }
  env.master_addr = *master_addr;
  env.master_port = *parsed_port;
  return env;
}

absl::StatusOr<DistributedEnv> DistributedEnvFromEnvironment() {
  return ParseDistributedEnv([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
}

DataParallelReducer::DataParallelReducer(std::unique_ptr<c10d_compat::CollectiveGroup> group,
                                         const DataParallelOptions& options)
    : group_(std::move(group)), options_(options) {}

absl::StatusOr<std::unique_ptr<DataParallelReducer>> DataParallelReducer::Create(
    const DistributedEnv& env, const DataParallelOptions& options) {
  if (options.bucket_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bucket_bytes must be > 0, got ", options.bucket_bytes));
  }
  absl::StatusOr<std::unique_ptr<c10d_compat::CollectiveGroup>> group =
      JoinProcessGroup(env, options);
  if (!group.ok()) return group.status();
  return std::unique_ptr<DataParallelReducer>(new DataParallelReducer(*std::move(group), options));
}

absl::Status DataParallelReducer::AllReduceSum(std::vector<torch::Tensor>& grads) {
  return RunBucketed(grads, Collective::kSum);
}

absl::StatusOr<double> DataParallelReducer::AllReduceScalar(double value) {
  torch::Tensor scalar = torch::full({1}, value, torch::kFloat64);
  absl::Status status = group_->AllReduce(scalar, c10d_compat::ReduceKind::kSum);
  if (!status.ok()) return status;
  return scalar.item<double>();
}

absl::Status DataParallelReducer::BroadcastFromRankZero(std::vector<torch::Tensor>& tensors) {
  return RunBucketed(tensors, Collective::kBroadcast);
}

// Every rank contributes [f, -f] to a MAX all-reduce: the result is [max f, -min f], and the
// ranks agree iff max f == min f.
absl::Status DataParallelReducer::CheckLayoutAgreed(const std::vector<torch::Tensor>& tensors) {
  const int64_t fingerprint = LayoutFingerprint(tensors);
  torch::Tensor pair = torch::tensor({fingerprint, -fingerprint}, torch::kInt64);
  absl::Status status = group_->AllReduce(pair, c10d_compat::ReduceKind::kMax);
  if (!status.ok()) return status;
  if (pair[0].item<int64_t>() != -pair[1].item<int64_t>()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "data parallel ranks disagree on the gradient layout (count, shapes or dtypes); rank ",
        rank(), " has ", tensors.size(), " tensors"));
  }
  return absl::OkStatus();
}

absl::Status DataParallelReducer::RunBucketed(std::vector<torch::Tensor>& tensors,
                                              Collective collective) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined()) {
      return absl::InvalidArgumentError(absl::StrCat("data parallel: tensor ", i, " is undefined"));
    }
    if (!tensors[i].device().is_cpu() || tensors[i].is_sparse()) {
      return absl::InvalidArgumentError(
          absl::StrCat("data parallel: tensor ", i, " is not a dense CPU tensor"));
    }
  }
  absl::Status status = CheckLayoutAgreed(tensors);
  if (!status.ok()) return status;

  // Parameters are autograd leaves: writing the results back must not be recorded.
  torch::NoGradGuard no_grad;
  auto run = [&](torch::Tensor& buffer) {
    return collective == Collective::kSum ? group_->AllReduce(buffer, c10d_compat::ReduceKind::kSum)
                                          : group_->Broadcast(buffer, /*root=*/0);
  };
  int64_t num_buckets = 0;
  size_t begin = 0;
  while (begin < tensors.size()) {
    // [begin, end): consecutive tensors of one dtype that fit in bucket_bytes (at least one).
    const torch::ScalarType dtype = tensors[begin].scalar_type();
    int64_t bytes = tensors[begin].numel() * tensors[begin].element_size();
    size_t end = begin + 1;
    while (end < tensors.size() && tensors[end].scalar_type() == dtype) {
      const int64_t next = tensors[end].numel() * tensors[end].element_size();
      if (bytes + next > options_.bucket_bytes) break;
      bytes += next;
      ++end;
    }
    ++num_buckets;
    if (end - begin == 1 && tensors[begin].is_contiguous()) {
      status = run(tensors[begin]);  // in place, no copy
      if (!status.ok()) return status;
      begin = end;
      continue;
    }
    std::vector<torch::Tensor> pieces;
    pieces.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) pieces.push_back(tensors[i].reshape({-1}));
    torch::Tensor flat = torch::cat(pieces);
    status = run(flat);
    if (!status.ok()) return status;
    int64_t offset = 0;
    for (size_t i = begin; i < end; ++i) {
      const int64_t numel = tensors[i].numel();
      tensors[i].copy_(flat.slice(0, offset, offset + numel).view(tensors[i].sizes()));
      offset += numel;
    }
    begin = end;
  }
  last_num_buckets_ = num_buckets;
  return absl::OkStatus();
}

}  // namespace lockstep::trainer
