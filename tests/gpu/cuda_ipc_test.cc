// weight_sync/cuda_ipc.h: argument checks (no GPU needed), the refusals CUDA makes in the
// exporting process, and a round trip into a second process. CUDA cannot open a handle in the
// process that exported it, and a forked child of a process that has used CUDA cannot use CUDA:
// the peer is this test binary re-executed (/proc/self/exe) in child mode, chosen by the
// environment variable below.
#include "weight_sync/cuda_ipc.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "tests/gpu/gpu_test_util.h"

namespace lockstep::weight_sync {
namespace {

constexpr char kChildEnv[] = "LOCKSTEP_CUDA_IPC_CHILD";  // "<read fd>,<write fd>"

// The bytes both processes agree on: byte i of the exported buffer.
unsigned char PatternByte(size_t i) { return static_cast<unsigned char>((i * 131 + 7) & 0xff); }

bool ReadAll(int fd, char* out, size_t bytes) {
  while (bytes > 0) {
    const ssize_t got = read(fd, out, bytes);
    if (got <= 0) return false;
    out += got;
    bytes -= static_cast<size_t>(got);
  }
  return true;
}

// Child mode: reads the exported bytes from `in_fd`, copies the parent's buffer into its own
// device memory through the IPC mapping, checks the pattern and reports one byte ('0' = ok) on
// `out_fd`. Returns the exit code.
int RunChild(int in_fd, int out_fd) {
  auto fail = [out_fd](const std::string& why, int code) {
    std::fprintf(stderr, "cuda_ipc child: %s\n", why.c_str());
    const char byte = static_cast<char>('0' + code);
    (void)!write(out_fd, &byte, 1);
    return code;
  };
  std::string handle(kCudaIpcHandleBytes, '\0');
  if (!ReadAll(in_fd, handle.data(), handle.size())) return fail("no handle (parent skipped)", 2);
  if (cudaSetDevice(0) != cudaSuccess) return fail("cudaSetDevice(0)", 3);
  auto buffer = CudaIpcBuffer::Open(handle);
  if (!buffer.ok()) return fail(buffer.status().ToString(), 3);
  const size_t size = (*buffer)->size();
  void* copy = nullptr;
  if (cudaMalloc(&copy, size) != cudaSuccess) return fail("cudaMalloc", 4);
  cudaStream_t stream;
  if (cudaStreamCreate(&stream) != cudaSuccess) return fail("cudaStreamCreate", 4);
  // Two copies: the whole buffer, then its second half over the first (the offset path).
  absl::Status status = (*buffer)->CopyTo(copy, 0, size, stream, absl::Now() + absl::Seconds(30));
  if (!status.ok()) return fail(status.ToString(), 5);
  std::vector<unsigned char> host(size);
  if (cudaMemcpy(host.data(), copy, size, cudaMemcpyDeviceToHost) != cudaSuccess) {
    return fail("cudaMemcpy to host", 5);
  }
  for (size_t i = 0; i < size; ++i) {
    if (host[i] != PatternByte(i)) return fail("byte " + std::to_string(i) + " differs", 6);
  }
  status =
      (*buffer)->CopyTo(copy, size / 2, size - size / 2, stream, absl::Now() + absl::Seconds(30));
  if (!status.ok()) return fail(status.ToString(), 5);
  if (cudaMemcpy(host.data(), copy, size - size / 2, cudaMemcpyDeviceToHost) != cudaSuccess) {
    return fail("cudaMemcpy to host", 5);
  }
  for (size_t i = 0; i < size - size / 2; ++i) {
    if (host[i] != PatternByte(size / 2 + i)) return fail("offset copy differs", 6);
  }
  status = (*buffer)->Close();
  if (!status.ok()) return fail(status.ToString(), 7);
  cudaFree(copy);
  cudaStreamDestroy(stream);
  return fail("ok", 0);
}

// Child mode, when this binary was re-executed as the peer: a global test environment (its SetUp
// runs after every static initializer, before the first test) runs RunChild and exits.
class ChildModeEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* fds = std::getenv(kChildEnv);
    if (fds == nullptr) return;
    int in_fd = -1, out_fd = -1;
    if (std::sscanf(fds, "%d,%d", &in_fd, &out_fd) != 2) _exit(9);
    _exit(RunChild(in_fd, out_fd));
  }
};
::testing::Environment* const kChildMode =
    ::testing::AddGlobalTestEnvironment(new ChildModeEnvironment);

TEST(CudaIpcArgumentsTest, ExportRefusesNullAndZeroBytes) {
  char host = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(ExportCudaIpcHandle(nullptr, 16).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ExportCudaIpcHandle(&host, 0).status()));
}

TEST(CudaIpcArgumentsTest, OpenRefusesWrongSizeAndZeroByteBuffer) {
  EXPECT_TRUE(absl::IsInvalidArgument(CudaIpcBuffer::Open("").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      CudaIpcBuffer::Open(std::string(kCudaIpcHandleBytes - 1, 'x')).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      CudaIpcBuffer::Open(std::string(kCudaIpcHandleBytes + 1, 'x')).status()));
  // Right length, size field 0.
  EXPECT_TRUE(absl::IsInvalidArgument(
      CudaIpcBuffer::Open(std::string(kCudaIpcHandleBytes, '\0')).status()));
}

TEST(CudaIpcArgumentsTest, CopyRefusesNullZeroBytesAndOutOfRange) {
  char destination = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(CheckIpcCopyArguments(nullptr, 0, 4, 16)));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckIpcCopyArguments(&destination, 0, 0, 16)));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckIpcCopyArguments(&destination, 0, 17, 16)));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckIpcCopyArguments(&destination, 12, 5, 16)));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckIpcCopyArguments(&destination, 17, 1, 16)));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckIpcCopyArguments(&destination, 8, SIZE_MAX, 16)));
  EXPECT_TRUE(CheckIpcCopyArguments(&destination, 12, 4, 16).ok());
}

TEST(CudaIpcTest, ExportRefusesHostMemory) {
  LOCKSTEP_REQUIRE_GPUS(1);
  std::vector<char> host(64);
  EXPECT_TRUE(absl::IsInvalidArgument(ExportCudaIpcHandle(host.data(), host.size()).status()));
}

TEST(CudaIpcTest, OpenInTheExportingProcessFails) {
  LOCKSTEP_REQUIRE_GPUS(1);
  LOCKSTEP_CUDA_OK(cudaSetDevice(0));
  gpu_test::DeviceBuffer<float> buffer(1024);
  auto handle = ExportCudaIpcHandle(buffer.get(), 1024 * sizeof(float));
  ASSERT_TRUE(handle.ok()) << handle.status();
  EXPECT_EQ(handle->size(), kCudaIpcHandleBytes);
  EXPECT_FALSE(CudaIpcBuffer::Open(*handle).ok());
}

TEST(CudaIpcTest, AnotherProcessCopiesTheExportedBuffer) {
  LOCKSTEP_REQUIRE_GPUS(1);
  LOCKSTEP_CUDA_OK(cudaSetDevice(0));
  const size_t size = (4 << 20) + 3;  // not a multiple of any tile
  std::vector<unsigned char> pattern(size);
  for (size_t i = 0; i < size; ++i) pattern[i] = PatternByte(i);
  gpu_test::DeviceBuffer<unsigned char> buffer(pattern);
  LOCKSTEP_CUDA_OK(cudaDeviceSynchronize());  // written before the peer copies
  auto handle = ExportCudaIpcHandle(buffer.get(), size);
  ASSERT_TRUE(handle.ok()) << handle.status();

  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  const std::string fds = std::to_string(to_child[0]) + "," + std::to_string(to_parent[1]);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(to_child[1]);  // else the peer would hold open the pipe it waits on
    close(to_parent[0]);
    setenv(kChildEnv, fds.c_str(), 1);
    execl("/proc/self/exe", "cuda_ipc_child", static_cast<char*>(nullptr));
    _exit(8);
  }
  close(to_child[0]);
  close(to_parent[1]);
  ASSERT_EQ(write(to_child[1], handle->data(), handle->size()),
            static_cast<ssize_t>(handle->size()));
  close(to_child[1]);
  // The child answers after its copies; the buffer stays alive until then. Bounded: a hung
  // peer is killed after two minutes.
  char verdict = 'x';
  pollfd answer = {to_parent[0], POLLIN, 0};
  const bool answered = poll(&answer, 1, 120'000) == 1 && ReadAll(to_parent[0], &verdict, 1);
  if (!answered) kill(pid, SIGKILL);
  close(to_parent[0]);
  int wait_status = 0;
  ASSERT_EQ(waitpid(pid, &wait_status, 0), pid);
  EXPECT_TRUE(answered);
  EXPECT_EQ(verdict, '0') << "child exit code " << WEXITSTATUS(wait_status)
                          << " (2 no handle, 3 open, 4 alloc, 5 copy, 6 mismatch, 7 close)";
  EXPECT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0);
}

}  // namespace
}  // namespace lockstep::weight_sync
