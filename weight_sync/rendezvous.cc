#include "weight_sync/rendezvous.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "weight_sync/gloo_transport.h"
#include "weight_sync/gpu_transports.h"
#include "weight_sync/manifest.h"
#include "weight_sync/shm_channel.h"
#include "weight_sync/shm_transport.h"
#include "weight_sync/transport_choice.h"

namespace lockstep::weight_sync {
namespace {

std::string ManifestKey(int rank) { return absl::StrCat("manifest/", rank); }
std::string CheckedKey(int rank) { return absl::StrCat("checked/", rank); }
std::string SettingsKey(int rank) { return absl::StrCat("settings/", rank); }
std::string HostKey(int rank) { return absl::StrCat("host/", rank); }
std::string DeviceKey(int rank) { return absl::StrCat("device/", rank); }

// What every rank published besides its manifest and settings.
struct RankIdentities {
  std::vector<std::string> hosts;    // HostIdentity()
  std::vector<std::string> devices;  // WeightDeviceIdentity()
};

// What every rank must agree on besides the manifest (else the collectives would not match).
std::string Settings(const GroupOptions& options) {
  return absl::StrCat("bucket_bytes=", options.bucket_bytes, " verify=", options.verify ? 1 : 0,
                      " transport=", TransportName(options.transport));
}

// Step 1: rank 0 hosts the store, the others dial it (retrying until the timeout). The result is
// prefixed with the group name.
absl::StatusOr<c10::intrusive_ptr<c10d::Store>> ConnectStore(const GroupOptions& options,
                                                             const std::string& where) {
  try {
    // Rank 0 also dials its own server; c10d retries a refused connection only after a second,
    // so give that at least 10 s. Every wait below passes the group's timeout explicitly.
    const std::chrono::milliseconds store_timeout =
        options.rank == 0 ? std::max(options.timeout, std::chrono::milliseconds(10000))
                          : options.timeout;
    return c10d_compat::PrefixedStore(
        options.group_name, c10d_compat::ConnectTcpStore(options.store_host, options.store_port,
                                                         options.rank == 0, store_timeout));
  } catch (const std::exception& e) {
    const std::string text = c10d_compat::ErrorText(e);
    if (options.rank == 0) {
      return absl::UnavailableError(absl::StrCat(where, ": cannot host the store: ", text));
    }
    return absl::DeadlineExceededError(absl::StrCat(where, ": no store reachable within ",
                                                    options.timeout.count(), " ms: ", text));
  }
}

// Step 2: publishes this rank's manifest, settings, host and weight device (`device`), checks
// every rank's against rank 0's. Returns every rank's host and device.
absl::StatusOr<RankIdentities> CompareRanks(const GroupOptions& options, const Manifest& manifest,
                                            const std::string& device, c10d::Store& store,
                                            const std::string& where) {
  std::vector<std::string> manifest_keys;
  for (int r = 0; r < options.world_size; ++r) manifest_keys.push_back(ManifestKey(r));
  std::vector<Manifest> manifests;
  RankIdentities identities;
  std::string settings_error;
  try {
    SetText(store, SettingsKey(options.rank), Settings(options));
    SetText(store, HostKey(options.rank), HostIdentity());
    SetText(store, DeviceKey(options.rank), device);
    SetText(store, ManifestKey(options.rank), EncodeManifest(manifest));
    try {
      store.wait(manifest_keys, options.timeout);
    } catch (const std::exception& e) {
      std::vector<int> missing;
      for (int r = 0; r < options.world_size; ++r) {
        if (!store.check({ManifestKey(r)})) missing.push_back(r);
      }
      return absl::DeadlineExceededError(
          absl::StrCat(where, ": rank(s) ", absl::StrJoin(missing, ", "), " did not join within ",
                       options.timeout.count(), " ms"));
    }
    const std::string reference_settings = GetText(store, SettingsKey(0));
    for (int r = 1; r < options.world_size; ++r) {
      const std::string settings = GetText(store, SettingsKey(r));
      if (settings != reference_settings) {
        settings_error = absl::StrCat(where, ": rank ", r, " uses ", settings, ", rank 0 uses ",
                                      reference_settings);
        break;
      }
    }
    for (int r = 0; r < options.world_size; ++r) {
      identities.hosts.push_back(GetText(store, HostKey(r)));
      identities.devices.push_back(GetText(store, DeviceKey(r)));
    }
    for (int r = 0; r < options.world_size; ++r) {
      absl::StatusOr<Manifest> decoded = DecodeManifest(GetText(store, ManifestKey(r)));
      if (!decoded.ok()) {
        return absl::DataLossError(
            absl::StrCat(where, ": rank ", r, "'s manifest: ", decoded.status().message()));
      }
      manifests.push_back(*std::move(decoded));
    }
    // Rank 0 keeps the store alive until every rank has read the manifests (a refused group
    // would otherwise tear the store down under a slower rank).
    SetText(store, CheckedKey(options.rank), "1");
    if (options.rank == 0) {
      if (absl::Status s =
              WaitForRanks(store, CheckedKey, 0, options, where, "finished the rendezvous");
          !s.ok()) {
        return s;
      }
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat(where, ": store failed: ", c10d_compat::ErrorText(e)));
  }
  if (!settings_error.empty()) return absl::FailedPreconditionError(settings_error);
  for (int r = 1; r < options.world_size; ++r) {
    if (std::optional<std::string> difference = FirstDifference(manifests[0], 0, manifests[r], r)) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, ": parameter sets differ: ", *difference));
    }
  }
  return identities;
}

}  // namespace

void SetText(c10d::Store& store, const std::string& key, const std::string& value) {
  store.set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

std::string GetText(c10d::Store& store, const std::string& key) {
  const std::vector<uint8_t> bytes = store.get(key);
  return std::string(bytes.begin(), bytes.end());
}

absl::Status WaitForRanks(c10d::Store& store, std::string (*key_of)(int rank), int first_rank,
                          const GroupOptions& options, const std::string& where,
                          const std::string& what) {
  std::vector<std::string> keys;
  for (int r = first_rank; r < options.world_size; ++r) keys.push_back(key_of(r));
  try {
    store.wait(keys, options.timeout);
  } catch (const std::exception& e) {
    return absl::DeadlineExceededError(absl::StrCat(where, ": not every rank ", what, " within ",
                                                    options.timeout.count(),
                                                    " ms (a peer left during the rendezvous)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Connection> Rendezvous(const GroupOptions& options, const BucketPlan& plan) {
  const std::string where = absl::StrCat("weight-sync group '", options.group_name, "' (rank ",
                                         options.rank, " of ", options.world_size, ", store ",
                                         options.store_host, ":", options.store_port, ")");
  // Where this rank's weights live: refused here, before any peer waits on us, when this build or
  // process cannot hold them on CUDA.
  absl::StatusOr<std::string> device = WeightDeviceIdentity(options);
  if (!device.ok()) {
    return absl::Status(device.status().code(),
                        absl::StrCat(where, ": ", device.status().message()));
  }
  Connection connection;
  absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store = ConnectStore(options, where);
  if (!store.ok()) return store.status();
  connection.store = *std::move(store);
  absl::StatusOr<RankIdentities> identities =
      CompareRanks(options, plan.manifest(), *device, *connection.store, where);
  if (!identities.ok()) return identities.status();
  absl::StatusOr<Transport> choice =
      ChooseTransport(options, identities->hosts, identities->devices, where);
  if (!choice.ok()) return choice.status();

  // Step 3: the control group (its own rendezvous through the same prefixed store).
  try {
    connection.control = std::make_unique<c10d_compat::CollectiveGroup>(
        connection.store, options.rank, options.world_size, options.store_host, options.timeout);
  } catch (const std::exception& e) {
    return absl::DeadlineExceededError(
        absl::StrCat(where, ": the process group did not form within ", options.timeout.count(),
                     " ms: ", c10d_compat::ErrorText(e)));
  }
  // Step 4: the transport.
  if (IsGpuTransport(*choice)) {
    absl::StatusOr<std::unique_ptr<BucketTransport>> gpu = ConnectGpuTransport(
        *choice, options, *connection.store, plan, *connection.control, where);
    if (!gpu.ok()) return gpu.status();
    connection.transport = *std::move(gpu);
  } else if (*choice == Transport::kSharedMemory) {
    absl::StatusOr<std::unique_ptr<ShmBucketTransport>> shared =
        ShmBucketTransport::Connect(options, *connection.store, plan, where);
    if (!shared.ok()) return shared.status();
    connection.transport = *std::move(shared);
  }
  if (!connection.transport) {
    connection.transport =
        std::make_unique<GlooBucketTransport>(options, plan, *connection.control);
  }
  return connection;
}

}  // namespace lockstep::weight_sync
