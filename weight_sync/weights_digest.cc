#include "weight_sync/weights_digest.h"

#include <openssl/evp.h>

#include <cstdint>
#include <cstdio>
#include <memory>

namespace lockstep::weight_sync {
namespace {

void UpdateInt64(EVP_MD_CTX* context, int64_t value) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<unsigned char>(static_cast<uint64_t>(value) >> (8 * i));
  EVP_DigestUpdate(context, bytes, sizeof(bytes));
}

void UpdateString(EVP_MD_CTX* context, const std::string& text) {
  EVP_DigestUpdate(context, text.data(), text.size());
  EVP_DigestUpdate(context, "", 1);  // the terminating '\0'
}

}  // namespace

std::string WeightsSha256(const TensorMap& params) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(),
                                                                  &EVP_MD_CTX_free);
  EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr);
  for (const auto& [name, tensor] : params) {
    UpdateString(context.get(), name);
    UpdateString(context.get(), c10::toString(tensor.scalar_type()));
    UpdateInt64(context.get(), tensor.dim());
    for (int64_t size : tensor.sizes()) UpdateInt64(context.get(), size);
    const torch::Tensor data = tensor.detach().to(torch::kCPU).contiguous();
    EVP_DigestUpdate(context.get(), data.data_ptr(), data.nbytes());
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(context.get(), digest, &length);
  std::string hex;
  char pair[3];
  for (unsigned int i = 0; i < length; ++i) {
    std::snprintf(pair, sizeof(pair), "%02x", digest[i]);
    hex += pair;
  }
  return hex;
}

}  // namespace lockstep::weight_sync
