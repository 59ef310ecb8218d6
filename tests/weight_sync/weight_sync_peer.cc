// A receiver rank for the multi-process weight-sync tests. For each group name in --groups it
// joins the group, receives versions --first_version.. (--receives of them), checks every tensor
// bit-for-bit against SyntheticParams(--seed + version) and prints one line per event:
//   STARTED   JOINED <group> <transport>   RECEIVED <version>   ERROR <group> <code>: <message>
// --transport picks the transport (auto, gloo, shm); --fake_host makes it claim another host.
// With --stall it joins the first group, prints JOINED and then sleeps (a hung generator).
// Exit code: 0 when every group succeeded, 1 on a bit mismatch, 2 when some group failed.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_split.h"
#include "tests/weight_sync/synthetic_params.h"
#include "weight_sync/sync_group.h"

namespace ws = lockstep::weight_sync;

int main(int argc, char** argv) {
  CLI::App app{"weight-sync test peer"};
  ws::GroupOptions options;
  ws::testing::SyntheticSpec spec;
  std::string groups = "sync";
  std::string dtype_name = "float32";
  int64_t timeout_ms = 3000;
  int64_t first_version = 1;
  int receives = 1;
  bool stall = false;
  std::string transport = "auto";
  std::string fake_host;
  app.add_option("--port", options.store_port)->required();
  app.add_option("--rank", options.rank)->required();
  app.add_option("--world_size", options.world_size)->required();
  app.add_option("--groups", groups);
  app.add_option("--timeout_ms", timeout_ms);
  app.add_option("--bucket_bytes", options.bucket_bytes);
  app.add_option("--layers", spec.num_layers);
  app.add_option("--width", spec.width);
  app.add_option("--seed", spec.seed);
  app.add_option("--dtype", dtype_name);
  app.add_option("--first_version", first_version);
  app.add_option("--receives", receives);
  app.add_flag("--verify", options.verify);
  app.add_flag("--stall", stall);
  app.add_option("--transport", transport, "auto, gloo or shm");
  app.add_option("--fake_host", fake_host, "Pretend to run on this host (another host's rank)");
  CLI11_PARSE(app, argc, argv);
  absl::StatusOr<ws::Transport> parsed = ws::ParseTransport(transport);
  if (!parsed.ok()) {
    std::printf("ERROR %s\n", parsed.status().ToString().c_str());
    return 2;
  }
  options.transport = *parsed;
  if (!fake_host.empty()) setenv("LOCKSTEP_WEIGHT_SYNC_HOST", fake_host.c_str(), 1);
  options.timeout = std::chrono::milliseconds(timeout_ms);
  const torch::Dtype dtype = dtype_name == "bfloat16" ? torch::kBFloat16 : torch::kFloat32;
  setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("STARTED\n");  // the test starts rank 0's clock only now (process start-up is slow)

  // Every rank derives the manifest from the same spec (the values do not matter for it).
  const ws::Manifest manifest = ws::ManifestOf(ws::testing::SyntheticParams(spec));
  int exit_code = 0;
  int64_t version = first_version;
  for (const std::string& group : std::vector<std::string>(absl::StrSplit(groups, ','))) {
    options.group_name = group;
    absl::StatusOr<std::unique_ptr<ws::WeightSyncGroup>> joined =
        ws::WeightSyncGroup::Join(options, manifest);
    if (!joined.ok()) {
      std::printf("ERROR %s %s\n", group.c_str(), joined.status().ToString().c_str());
      exit_code = 2;
      continue;
    }
    std::printf("JOINED %s %s\n", group.c_str(), ws::TransportName((*joined)->transport()));
    if (stall) {
      while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    for (int i = 0; i < receives; ++i, ++version) {
      absl::StatusOr<lockstep::TensorMap> received = (*joined)->Receive(version, dtype);
      if (!received.ok()) {
        std::printf("ERROR %s %s\n", group.c_str(), received.status().ToString().c_str());
        exit_code = 2;
        break;
      }
      ws::testing::SyntheticSpec expected_spec = spec;
      expected_spec.seed = spec.seed + version;
      const std::string differing =
          ws::testing::FirstBitDifference(ws::testing::SyntheticParams(expected_spec), *received);
      if (!differing.empty()) {
        std::printf("MISMATCH %s\n", differing.c_str());
        return 1;
      }
      std::printf("RECEIVED %lld\n", static_cast<long long>(version));
    }
  }
  return exit_code;
}
