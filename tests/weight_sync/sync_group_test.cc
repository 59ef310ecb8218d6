// Weight-sync group tests (label weight_sync): the bucket plan and manifests as values, the
// rendezvous in-process (mismatch, missing peer), and real broadcasts to receiver processes
// (bit-identical, verification on; a receiver killed with SIGKILL mid-broadcast; re-forming),
// each over both transports (Gloo forced, shared memory); the transport choice across hosts
// (a peer that claims another host); and no shared-memory object left in /dev/shm.
#include "weight_sync/sync_group.h"

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "tests/weight_sync/child_process.h"
#include "tests/weight_sync/synthetic_params.h"
#include "weight_sync/bucket_plan.h"
#include "weight_sync/manifest.h"

namespace lockstep::weight_sync {
namespace {

using ::lockstep::testing::ChildProcess;
using ::lockstep::testing::FreeLoopbackPort;
using ::testing::AllOf;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Manifest MakeManifest(std::vector<std::pair<std::string, std::vector<int64_t>>> entries) {
  return Manifest{std::move(entries)};
}

TEST(BucketPlanTest, SegmentsCoverEveryElementOnceInNameOrder) {
  const Manifest manifest = MakeManifest({{"a", {3, 5}}, {"b", {2}}, {"c", {40}}, {"d", {1, 1}}});
  absl::StatusOr<BucketPlan> plan = BucketPlan::Create(manifest, /*bucket_bytes=*/4 * 16);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->num_elements(), 15 + 2 + 40 + 1);
  EXPECT_EQ(plan->total_bytes(), 58 * 4);
  EXPECT_EQ(plan->num_buckets(), 4);  // 16 + 16 + 16 + 10
  int64_t stream_position = 0;
  std::vector<int64_t> next_offset(manifest.entries.size(), 0);
  for (const Bucket& bucket : plan->buckets()) {
    EXPECT_EQ(bucket.stream_offset, stream_position);
    int64_t bucket_position = 0;
    for (const Segment& segment : bucket.segments) {
      EXPECT_EQ(segment.bucket_offset, bucket_position);
      EXPECT_EQ(segment.entry_offset, next_offset[segment.entry]);
      EXPECT_EQ(plan->entry_offset(segment.entry) + segment.entry_offset,
                bucket.stream_offset + segment.bucket_offset);
      next_offset[segment.entry] += segment.num_elements;
      bucket_position += segment.num_elements;
    }
    EXPECT_EQ(bucket_position, bucket.num_elements);
    stream_position += bucket.num_elements;
  }
  EXPECT_THAT(next_offset, ::testing::ElementsAre(15, 2, 40, 1));
  // "c" spans buckets 1, 2 and 3.
  EXPECT_EQ(plan->bucket(1).segments.back().entry, 2);
  EXPECT_EQ(plan->bucket(2).segments.size(), 1u);
  EXPECT_EQ(plan->bucket(3).segments.front().entry, 2);
}

TEST(BucketPlanTest, RejectsBucketSizesThatAreNotWholeFloats) {
  EXPECT_EQ(BucketPlan::Create({}, 6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BucketPlan::Create({}, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ManifestTest, FirstDifferenceNamesTheTensorAndBothShapes) {
  const Manifest a = MakeManifest({{"x", {2}}, {"y", {4, 4}}, {"z", {1}}});
  EXPECT_EQ(FirstDifference(a, 0, a, 1), std::nullopt);
  EXPECT_EQ(FirstDifference(a, 0, MakeManifest({{"x", {2}}, {"y", {4, 8}}, {"z", {1}}}), 2),
            "tensor 'y' has shape [4, 4] on rank 0 but [4, 8] on rank 2");
  EXPECT_EQ(FirstDifference(a, 0, MakeManifest({{"x", {2}}, {"z", {1}}}), 1),
            "tensor 'y' exists on rank 0 but not on rank 1");
  EXPECT_EQ(FirstDifference(a, 0, MakeManifest({{"w", {2}}, {"x", {2}}}), 3),
            "tensor 'w' exists on rank 3 but not on rank 0");
}

TEST(ManifestTest, EncodeDecodeRoundTripsAndRejectsGarbage) {
  const Manifest a = MakeManifest({{"model.embed_tokens.weight", {151936, 1024}}, {"s", {}}});
  absl::StatusOr<Manifest> decoded = DecodeManifest(EncodeManifest(a));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, a);
  EXPECT_EQ(DecodeManifest("name-without-shape\n").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeManifest("x\t3,abc\n").status().code(), absl::StatusCode::kDataLoss);
}

TEST(ManifestTest, CheckMatchesNamesTheOffendingTensor) {
  TensorMap params = testing::SyntheticParams({.num_layers = 2, .width = 8});
  const Manifest manifest = ManifestOf(params);
  EXPECT_TRUE(CheckMatches(manifest, params).ok());
  params["layers.1.norm"] = torch::zeros({9});
  EXPECT_THAT(std::string(CheckMatches(manifest, params).message()), HasSubstr("layers.1.norm"));
  params.erase("layers.1.norm");
  EXPECT_THAT(std::string(CheckMatches(manifest, params).message()), HasSubstr("layers.1.norm"));
}

TEST(BucketHashTest, AnySingleBitFlipChangesTheHash) {
  std::vector<unsigned char> bytes(1000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 7);
  const uint64_t reference = BucketHash(bytes.data(), bytes.size());
  EXPECT_EQ(reference, BucketHash(bytes.data(), bytes.size()));
  for (size_t i = 0; i < bytes.size(); i += 37) {
    for (int bit = 0; bit < 8; bit += 3) {
      bytes[i] ^= static_cast<unsigned char>(1 << bit);
      EXPECT_NE(BucketHash(bytes.data(), bytes.size()), reference) << i << ":" << bit;
      bytes[i] ^= static_cast<unsigned char>(1 << bit);
    }
  }
  EXPECT_NE(BucketHash(bytes.data(), bytes.size() - 1), reference);
}

TEST(WeightSyncGroupTest, OptionsAreValidatedNamingTheField) {
  GroupOptions options;
  EXPECT_THAT(std::string(options.Validate().message()), HasSubstr("store_port"));
  options.store_port = 1234;
  options.rank = 2;
  options.world_size = 2;
  EXPECT_THAT(std::string(options.Validate().message()), HasSubstr("rank"));
  options.rank = 0;
  options.bucket_bytes = 10;
  EXPECT_THAT(std::string(options.Validate().message()), HasSubstr("bucket_bytes"));
}

GroupOptions LoopbackOptions(int port, int rank, int world_size, const std::string& group,
                             milliseconds timeout) {
  GroupOptions options;
  options.store_port = port;
  options.rank = rank;
  options.world_size = world_size;
  options.group_name = group;
  options.timeout = timeout;
  options.verify = true;
  return options;
}

// Entries of /dev/shm that a group named `group` created ("lockstep-ws-<group>-<nonce>").
std::vector<std::string> ShmLeftovers(const std::string& group) {
  std::vector<std::string> found;
  const std::string prefix = "lockstep-ws-" + group + "-";
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* entry = readdir(dir)) {
      if (std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) == 0) {
        found.push_back(entry->d_name);
      }
    }
    closedir(dir);
  }
  return found;
}

TEST(WeightSyncGroupTest, TransportNamesRoundTrip) {
  for (Transport t : {Transport::kAuto, Transport::kGloo, Transport::kSharedMemory}) {
    EXPECT_EQ(ParseTransport(TransportName(t)).value(), t);
  }
  EXPECT_THAT(std::string(ParseTransport("rdma").status().message()), HasSubstr("'rdma'"));
}

// Two ranks in this process (one host): auto picks shared memory, the name is gone from
// /dev/shm as soon as both mapped it, and fp32 and bf16 receives are exact. ~25 MB in buckets of
// 12 MiB + 4000 bytes: several buckets, each handed over in 8 MiB chunks plus a ragged one.
TEST(WeightSyncGroupTest, AutoUsesSharedMemoryOnOneHostAndLeavesNothingInDevShm) {
  const int port = FreeLoopbackPort();
  const testing::SyntheticSpec spec{.num_layers = 6, .width = 1024, .seed = 21};
  const Manifest manifest = ManifestOf(testing::SyntheticParams(spec));
  auto options_for = [&](int rank) {
    GroupOptions options = LoopbackOptions(port, rank, 2, "inproc-auto", milliseconds(5000));
    options.bucket_bytes = (int64_t{12} << 20) + 4000;
    return options;
  };
  auto receiver = std::async(std::launch::async,
                             [&] { return WeightSyncGroup::Join(options_for(1), manifest); });
  absl::StatusOr<std::unique_ptr<WeightSyncGroup>> sender =
      WeightSyncGroup::Join(options_for(0), manifest);
  absl::StatusOr<std::unique_ptr<WeightSyncGroup>> other = receiver.get();
  ASSERT_TRUE(sender.ok()) << sender.status();
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ((*sender)->transport(), Transport::kSharedMemory);
  EXPECT_EQ((*other)->transport(), Transport::kSharedMemory);
  EXPECT_EQ((*sender)->num_buckets(), 3);
  EXPECT_THAT(ShmLeftovers("inproc-auto"), ::testing::IsEmpty());
  for (int64_t version = 1; version <= 3; ++version) {
    const torch::Dtype dtype = version == 2 ? torch::kBFloat16 : torch::kFloat32;
    auto received =
        std::async(std::launch::async, [&] { return (*other)->Receive(version, dtype); });
    testing::SyntheticSpec versioned = spec;
    versioned.seed += version;
    const TensorMap params = testing::SyntheticParams(versioned);
    ASSERT_TRUE((*sender)->Send(params, version).ok());
    absl::StatusOr<TensorMap> got = received.get();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(testing::FirstBitDifference(params, *got), "") << "version " << version;
    for (const auto& [name, tensor] : *got) EXPECT_TRUE(tensor.device().is_cpu()) << name;
  }
}

TEST(WeightSyncGroupTest, MismatchedManifestsAreRefusedOnEveryRankNamingTheFirstTensor) {
  const int port = FreeLoopbackPort();
  const Manifest trainer = MakeManifest({{"a", {4}}, {"b", {2, 3}}, {"c", {5}}});
  const Manifest generator = MakeManifest({{"a", {4}}, {"b", {3, 2}}, {"c", {6}}});
  auto other = std::async(std::launch::async, [&] {
    return WeightSyncGroup::Join(LoopbackOptions(port, 1, 2, "mismatch", milliseconds(5000)),
                                 generator)
        .status();
  });
  const absl::Status status =
      WeightSyncGroup::Join(LoopbackOptions(port, 0, 2, "mismatch", milliseconds(5000)), trainer)
          .status();
  const absl::Status other_status = other.get();
  for (const absl::Status& s : {status, other_status}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("tensor 'b' has shape [2, 3] on rank 0 but [3, 2] on rank 1"));
  }
}

TEST(WeightSyncGroupTest, DifferentBucketSizesAreRefusedAtRendezvous) {
  const int port = FreeLoopbackPort();
  const Manifest manifest = MakeManifest({{"a", {4}}});
  auto other = std::async(std::launch::async, [&] {
    GroupOptions options = LoopbackOptions(port, 1, 2, "settings", milliseconds(5000));
    options.bucket_bytes = 1024;
    return WeightSyncGroup::Join(options, manifest).status();
  });
  const absl::Status status =
      WeightSyncGroup::Join(LoopbackOptions(port, 0, 2, "settings", milliseconds(5000)), manifest)
          .status();
  for (const absl::Status& s : {status, other.get()}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("rank 1 uses bucket_bytes=1024"));
  }
}

TEST(WeightSyncGroupTest, MissingPeerIsDeadlineExceededWithinTheTimeout) {
  const int port = FreeLoopbackPort();
  const Clock::time_point start = Clock::now();
  const absl::Status status =
      WeightSyncGroup::Join(LoopbackOptions(port, 0, 3, "alone", milliseconds(800)),
                            MakeManifest({{"a", {4}}}))
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("rank(s) 1, 2 did not join"));
  EXPECT_LT(SecondsSince(start), 3.0);
}

TEST(WeightSyncGroupTest, ReceiverWithoutStoreIsDeadlineExceeded) {
  const int port = FreeLoopbackPort();  // nobody listens there
  const Clock::time_point start = Clock::now();
  const absl::Status status =
      WeightSyncGroup::Join(LoopbackOptions(port, 1, 2, "nostore", milliseconds(800)),
                            MakeManifest({{"a", {4}}}))
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_LT(SecondsSince(start), 4.0);
}

std::vector<std::string> PeerArgs(int port, int rank, int world_size, const std::string& groups,
                                  const testing::SyntheticSpec& spec, int64_t bucket_bytes,
                                  const std::string& dtype, int64_t first_version, int receives,
                                  Transport transport = Transport::kAuto) {
  return {WEIGHT_SYNC_PEER_PATH,
          "--port=" + std::to_string(port),
          "--rank=" + std::to_string(rank),
          "--world_size=" + std::to_string(world_size),
          "--groups=" + groups,
          "--timeout_ms=3000",
          "--bucket_bytes=" + std::to_string(bucket_bytes),
          "--layers=" + std::to_string(spec.num_layers),
          "--width=" + std::to_string(spec.width),
          "--seed=" + std::to_string(spec.seed),
          "--dtype=" + dtype,
          "--first_version=" + std::to_string(first_version),
          "--receives=" + std::to_string(receives),
          std::string("--transport=") + TransportName(transport),
          "--verify"};
}

TensorMap ParamsForVersion(testing::SyntheticSpec spec, int64_t version) {
  spec.seed += version;
  return testing::SyntheticParams(spec);
}

// The process tests run once per transport: Gloo forced, and shared memory (what auto picks on
// one host: AutoUsesSharedMemoryOnOneHost... and the hosts test cover auto itself).
class WeightSyncProcessTest : public ::testing::TestWithParam<Transport> {
 protected:
  Transport requested() const { return GetParam(); }
  Transport expected() const {
    return GetParam() == Transport::kGloo ? Transport::kGloo : Transport::kSharedMemory;
  }
  // "<group> <transport used>" as the peer prints it after JOINED.
  std::string Joined(const std::string& group) const {
    return absl::StrCat("JOINED ", group, " ", TransportName(expected()));
  }
  // Group names are unique per parameter (shared-memory names derive from them).
  std::string Group(const std::string& base) const {
    return absl::StrCat(base, "-", TransportName(requested()));
  }
};

INSTANTIATE_TEST_SUITE_P(Transports, WeightSyncProcessTest,
                         ::testing::Values(Transport::kGloo, Transport::kSharedMemory),
                         [](const ::testing::TestParamInfo<Transport>& info) {
                           return std::string(TransportName(info.param));
                         });

TEST_P(WeightSyncProcessTest, OneReceiverProcessGetsBitIdenticalWeightsEveryVersion) {
  const int port = FreeLoopbackPort();
  const std::string group_name = Group("one");
  const testing::SyntheticSpec spec{.num_layers = 4, .width = 64, .seed = 17};
  const int64_t bucket_bytes = 4 * 1500;
  ChildProcess peer(
      PeerArgs(port, 1, 2, group_name, spec, bucket_bytes, "float32", 1, 3, requested()));
  ASSERT_EQ(peer.ReadLine(milliseconds(30000)), "STARTED");
  GroupOptions options = LoopbackOptions(port, 0, 2, group_name, milliseconds(10000));
  options.bucket_bytes = bucket_bytes;
  options.transport = requested();
  absl::StatusOr<std::unique_ptr<WeightSyncGroup>> group =
      WeightSyncGroup::Join(options, ManifestOf(testing::SyntheticParams(spec)));
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ((*group)->transport(), expected());
  EXPECT_GT((*group)->num_buckets(), 10);
  for (int64_t version = 1; version <= 3; ++version) {
    ASSERT_TRUE((*group)->Send(ParamsForVersion(spec, version), version).ok());
  }
  EXPECT_EQ(peer.ReadLine(milliseconds(5000)), Joined(group_name));
  for (int version = 1; version <= 3; ++version) {
    EXPECT_EQ(peer.ReadLine(milliseconds(5000)), absl::StrCat("RECEIVED ", version));
  }
  EXPECT_EQ(peer.Wait(milliseconds(5000)), 0) << peer.output();
  EXPECT_THAT(ShmLeftovers(group_name), ::testing::IsEmpty());
}

TEST_P(WeightSyncProcessTest, TwoReceiverProcessesGetBitIdenticalWeightsEveryVersion) {
  const int port = FreeLoopbackPort();
  const std::string group_name = Group("bits");
  const testing::SyntheticSpec spec{.num_layers = 5, .width = 48, .seed = 11};
  const int64_t bucket_bytes = 4 * 1000;  // many buckets, tensors straddling them
  ChildProcess fp32(
      PeerArgs(port, 1, 3, group_name, spec, bucket_bytes, "float32", 1, 2, requested()));
  ChildProcess bf16(
      PeerArgs(port, 2, 3, group_name, spec, bucket_bytes, "bfloat16", 1, 2, requested()));
  ASSERT_TRUE(fp32.started() && bf16.started());
  ASSERT_EQ(fp32.ReadLine(milliseconds(30000)), "STARTED");
  ASSERT_EQ(bf16.ReadLine(milliseconds(30000)), "STARTED");

  GroupOptions options = LoopbackOptions(port, 0, 3, group_name, milliseconds(10000));
  options.bucket_bytes = bucket_bytes;
  options.transport = requested();
  absl::StatusOr<std::unique_ptr<WeightSyncGroup>> group =
      WeightSyncGroup::Join(options, ManifestOf(testing::SyntheticParams(spec)));
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ((*group)->transport(), expected());
  EXPECT_GT((*group)->num_buckets(), 10);
  for (int64_t version = 1; version <= 2; ++version) {
    ASSERT_TRUE((*group)->Send(ParamsForVersion(spec, version), version).ok());
  }
  for (ChildProcess* child : {&fp32, &bf16}) {
    EXPECT_EQ(child->ReadLine(milliseconds(5000)), Joined(group_name));
    EXPECT_EQ(child->ReadLine(milliseconds(5000)), "RECEIVED 1");
    EXPECT_EQ(child->ReadLine(milliseconds(5000)), "RECEIVED 2");
    EXPECT_EQ(child->Wait(milliseconds(5000)), 0) << child->output();
  }
  EXPECT_THAT(ShmLeftovers(group_name), ::testing::IsEmpty());
}

TEST_P(WeightSyncProcessTest, WrongVersionIsReportedAndTheGroupStaysUsable) {
  const int port = FreeLoopbackPort();
  const std::string group_name = Group("versions");
  const testing::SyntheticSpec spec{.num_layers = 2, .width = 16, .seed = 5};
  // The peer expects versions 3 and 4; the sender sends 7 (refused) and then 4.
  ChildProcess peer(PeerArgs(port, 1, 2, group_name, spec, 4 * 256, "float32", 3, 2, requested()));
  ASSERT_EQ(peer.ReadLine(milliseconds(30000)), "STARTED");
  GroupOptions options = LoopbackOptions(port, 0, 2, group_name, milliseconds(10000));
  options.bucket_bytes = 4 * 256;
  options.transport = requested();
  absl::StatusOr<std::unique_ptr<WeightSyncGroup>> group =
      WeightSyncGroup::Join(options, ManifestOf(testing::SyntheticParams(spec)));
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_TRUE((*group)->Send(ParamsForVersion(spec, 7), 7).ok());
  EXPECT_EQ(peer.ReadLine(milliseconds(5000)), Joined(group_name));
  const std::optional<std::string> refused = peer.ReadLine(milliseconds(5000));
  ASSERT_TRUE(refused.has_value());
  EXPECT_THAT(*refused, AllOf(HasSubstr("FAILED_PRECONDITION"), HasSubstr("sent version 7"),
                              HasSubstr("expected 3")));
  EXPECT_EQ(peer.Wait(milliseconds(5000)), 2) << peer.output();
}

TEST_P(WeightSyncProcessTest, KilledReceiverFailsEverySurvivorWithinTheTimeoutThenGroupReforms) {
  const int port = FreeLoopbackPort();
  // 64 MiB per broadcast: far more than the loopback socket buffers, so the sender blocks on the
  // stalled receiver until it is killed.
  const testing::SyntheticSpec spec{.num_layers = 16, .width = 1024, .seed = 3};
  const int64_t bucket_bytes = int64_t{16} << 20;
  const milliseconds timeout(3000);
  const std::string before = Group("before"), after = Group("after");
  std::vector<std::string> stall_args =
      PeerArgs(port, 1, 3, before, spec, bucket_bytes, "float32", 1, 1, requested());
  stall_args.push_back("--stall");
  ChildProcess stalled(stall_args);
  // The survivor: fails in group "before", then joins "after" and receives version 1 there.
  ChildProcess survivor(
      PeerArgs(port, 2, 3, before + "," + after, spec, bucket_bytes, "float32", 1, 1, requested()));
  // The replacement rank 1 for the re-formed group "after", started now because process start-up
  // is slow here; it waits in the rendezvous of "after" (its own timeout is generous).
  std::vector<std::string> fresh_args =
      PeerArgs(port, 1, 3, after, spec, bucket_bytes, "float32", 1, 1, requested());
  std::replace(fresh_args.begin(), fresh_args.end(), std::string("--timeout_ms=3000"),
               std::string("--timeout_ms=30000"));
  ChildProcess fresh(fresh_args);
  ASSERT_EQ(stalled.ReadLine(milliseconds(30000)), "STARTED");
  ASSERT_EQ(survivor.ReadLine(milliseconds(30000)), "STARTED");
  ASSERT_EQ(fresh.ReadLine(milliseconds(30000)), "STARTED");

  GroupOptions options = LoopbackOptions(port, 0, 3, before, timeout);
  options.bucket_bytes = bucket_bytes;
  options.transport = requested();
  const TensorMap params = ParamsForVersion(spec, 1);
  absl::StatusOr<std::unique_ptr<WeightSyncGroup>> group =
      WeightSyncGroup::Join(options, ManifestOf(params));
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_EQ(stalled.ReadLine(milliseconds(5000)), Joined(before));
  ASSERT_EQ(survivor.ReadLine(milliseconds(5000)), Joined(before));

  auto send = std::async(std::launch::async, [&] { return (*group)->Send(params, 1); });
  EXPECT_EQ(send.wait_for(milliseconds(500)), std::future_status::timeout)
      << "the broadcast should be stuck on the stalled receiver";
  const Clock::time_point killed = Clock::now();
  stalled.Kill();
  const absl::Status sent = send.get();
  const double sender_seconds = SecondsSince(killed);
  EXPECT_TRUE(sent.code() == absl::StatusCode::kUnavailable ||
              sent.code() == absl::StatusCode::kDeadlineExceeded)
      << sent;
  EXPECT_LT(sender_seconds, 3.0 + 1.0);
  const std::optional<std::string> survivor_error = survivor.ReadLine(milliseconds(3000 + 2000));
  ASSERT_TRUE(survivor_error.has_value()) << survivor.output();
  EXPECT_THAT(*survivor_error, HasSubstr("ERROR " + before));
  EXPECT_TRUE(absl::StrContains(*survivor_error, "DEADLINE_EXCEEDED") ||
              absl::StrContains(*survivor_error, "UNAVAILABLE"))
      << *survivor_error;
  EXPECT_LT(SecondsSince(killed), 3.0 + 2.0) << "the survivor must fail within the timeout";
  EXPECT_TRUE((*group)->broken());
  EXPECT_EQ((*group)->Send(params, 1).code(), absl::StatusCode::kFailedPrecondition);

  // Destroying the broken group must not hang.
  const Clock::time_point destroy = Clock::now();
  group->reset();
  EXPECT_LT(SecondsSince(destroy), 1.0);

  // Re-form with the survivor and the fresh rank 1 on the same store port.
  EXPECT_THAT(ShmLeftovers(before), ::testing::IsEmpty());
  options.group_name = after;
  absl::StatusOr<std::unique_ptr<WeightSyncGroup>> reformed =
      WeightSyncGroup::Join(options, ManifestOf(params));
  ASSERT_TRUE(reformed.ok()) << reformed.status();
  ASSERT_TRUE((*reformed)->Send(params, 1).ok());
  EXPECT_EQ(survivor.ReadLine(milliseconds(5000)), Joined(after));
  EXPECT_EQ(survivor.ReadLine(milliseconds(5000)), "RECEIVED 1");
  EXPECT_EQ(fresh.ReadLine(milliseconds(5000)), Joined(after));
  EXPECT_EQ(fresh.ReadLine(milliseconds(5000)), "RECEIVED 1");
  EXPECT_EQ(fresh.Wait(milliseconds(5000)), 0) << fresh.output();
  EXPECT_EQ(survivor.Wait(milliseconds(5000)), 2) << survivor.output();  // group "before" failed
  EXPECT_THAT(ShmLeftovers(after), ::testing::IsEmpty());
}

// A receiver that claims another host: auto falls back to Gloo (and works), while shm is refused
// at Join on every rank naming both hosts.
TEST(WeightSyncHostsTest, AnotherHostUsesGlooUnderAutoAndIsRefusedUnderShm) {
  const testing::SyntheticSpec spec{.num_layers = 2, .width = 32, .seed = 9};
  for (Transport transport : {Transport::kAuto, Transport::kSharedMemory}) {
    const int port = FreeLoopbackPort();
    const std::string group_name = absl::StrCat("hosts-", TransportName(transport));
    std::vector<std::string> args =
        PeerArgs(port, 1, 2, group_name, spec, 4 * 512, "float32", 1, 1, transport);
    args.push_back("--fake_host=elsewhere\nboot-0");
    ChildProcess peer(args);
    ASSERT_EQ(peer.ReadLine(milliseconds(30000)), "STARTED");
    GroupOptions options = LoopbackOptions(port, 0, 2, group_name, milliseconds(10000));
    options.bucket_bytes = 4 * 512;
    options.transport = transport;
    absl::StatusOr<std::unique_ptr<WeightSyncGroup>> group =
        WeightSyncGroup::Join(options, ManifestOf(testing::SyntheticParams(spec)));
    if (transport == Transport::kAuto) {
      ASSERT_TRUE(group.ok()) << group.status();
      EXPECT_EQ((*group)->transport(), Transport::kGloo);
      ASSERT_TRUE((*group)->Send(ParamsForVersion(spec, 1), 1).ok());
      EXPECT_EQ(peer.ReadLine(milliseconds(5000)), "JOINED " + group_name + " gloo");
      EXPECT_EQ(peer.ReadLine(milliseconds(5000)), "RECEIVED 1");
      EXPECT_EQ(peer.Wait(milliseconds(5000)), 0) << peer.output();
    } else {
      EXPECT_EQ(group.status().code(), absl::StatusCode::kFailedPrecondition) << group.status();
      EXPECT_THAT(std::string(group.status().message()),
                  AllOf(HasSubstr("transport=shm needs every rank on one host"),
                        HasSubstr("rank 1 on 'elsewhere'")));
      const std::optional<std::string> error = peer.ReadLine(milliseconds(5000));
      ASSERT_TRUE(error.has_value()) << peer.output();
      EXPECT_THAT(*error,
                  AllOf(HasSubstr("FAILED_PRECONDITION"), HasSubstr("rank 1 on 'elsewhere'")));
      EXPECT_EQ(peer.Wait(milliseconds(5000)), 2) << peer.output();
    }
    EXPECT_THAT(ShmLeftovers(group_name), ::testing::IsEmpty());
  }
}

}  // namespace
}  // namespace lockstep::weight_sync
