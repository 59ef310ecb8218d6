// Text the orchestrator sends to reward and environment servers must be valid UTF-8: proto3
// `string` fields refuse anything else (a Python server fails the whole call). A sampled
// completion need not be (a byte-level model can stop inside a character, or emit any bytes).
// Thread-compatible free function.
#ifndef LOCKSTEP_ORCHESTRATOR_VALID_UTF8_H_
#define LOCKSTEP_ORCHESTRATOR_VALID_UTF8_H_

#include <string>
#include <string_view>

namespace lockstep::orchestrator {

// `bytes` with every invalid or truncated UTF-8 sequence replaced by U+FFFD, one per bad byte.
std::string ValidUtf8(std::string_view bytes);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_VALID_UTF8_H_
