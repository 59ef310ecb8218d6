# CUDA detection for lockstep (included by the top CMakeLists.txt after find_package(Torch)).
#
#   LOCKSTEP_HAVE_CUDA        nvcc and the CUDA toolkit were found: model/kernels builds
#                             lockstep_kernels_cuda (raw-pointer kernels, plain nvcc, no LibTorch),
#                             lockstep_model gets the glue that runs them on CUDA tensors
#                             (model/kernels/*_ops_cuda.cc, host compiler), and tests/gpu,
#                             bench/gpu are built. No GPU is needed to compile.
#   LOCKSTEP_HAVE_NCCL        nccl.h and libnccl were found too: weight_sync builds
#                             lockstep_gpu_transfer (raw-pointer NCCL broadcast and CUDA IPC).
#   LOCKSTEP_TORCH_CUDA       the LibTorch in use was built with CUDA (-DTorch_DIR=<CUDA LibTorch>):
#                             model/kernels/torch_cuda_stream.cc, the one file that reads it, asks
#                             c10::cuda for LibTorch's current stream (for the kernel glue and the
#                             nccl/cuda_ipc transports) instead of naming the legacy default
#                             stream. Off with Debian's CPU-only LibTorch, where no tensor can be on
#                             CUDA, so the CPU paths run exactly as before.
#
# -DLOCKSTEP_CUDA=OFF skips all of it. One architecture by default (sm_90, H100/H200) to keep the
# CI compile short; -DCMAKE_CUDA_ARCHITECTURES=80;90 for more.
option(LOCKSTEP_CUDA "Compile the CUDA kernels and GPU transfer layers when nvcc is found" ON)
set(LOCKSTEP_HAVE_CUDA OFF)
set(LOCKSTEP_HAVE_NCCL OFF)
set(LOCKSTEP_TORCH_CUDA OFF)
if(LOCKSTEP_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "nvcc")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    enable_language(CUDA)
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND)
      set(LOCKSTEP_HAVE_CUDA ON)
      # std::string crosses the launcher boundary: host code in .cu files uses LibTorch's ABI.
      if(TORCH_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=([01])")
        string(APPEND CMAKE_CUDA_FLAGS " -D_GLIBCXX_USE_CXX11_ABI=${CMAKE_MATCH_1}")
      endif()
      find_path(LOCKSTEP_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
      find_library(LOCKSTEP_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
      if(LOCKSTEP_NCCL_INCLUDE_DIR AND LOCKSTEP_NCCL_LIBRARY)
        set(LOCKSTEP_HAVE_NCCL ON)
      endif()
      if(TARGET torch_cuda OR TARGET c10_cuda)
        set(LOCKSTEP_TORCH_CUDA ON)
      endif()
    endif()
  endif()
endif()
message(STATUS "lockstep CUDA: kernels ${LOCKSTEP_HAVE_CUDA} (${CMAKE_CUDA_COMPILER}, "
  "sm ${CMAKE_CUDA_ARCHITECTURES}), NCCL ${LOCKSTEP_HAVE_NCCL}, LibTorch CUDA ${LOCKSTEP_TORCH_CUDA}")
