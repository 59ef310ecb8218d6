// Helpers of the fault tests: process_watch.h (find a supervised child by its log file, see that
// a process is gone, count metrics lines, poll) and the prompt-ledger check.
#ifndef LOCKSTEP_TESTS_FAULTS_FAULT_TEST_SUPPORT_H_
#define LOCKSTEP_TESTS_FAULTS_FAULT_TEST_SUPPORT_H_

#include <cstdint>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/faults/process_watch.h"

namespace lockstep::fault_test {

// Every prompt accounted for: issued = trained + dropped_by_policy + failed + in_flight.
inline void ExpectLedgerHolds(const nlohmann::json& prompts) {
  ASSERT_TRUE(prompts.is_object()) << prompts;
  EXPECT_EQ(prompts["issued"].get<int64_t>(),
            prompts["trained"].get<int64_t>() + prompts["dropped_by_policy"].get<int64_t>() +
                prompts["failed"].get<int64_t>() + prompts["in_flight"].get<int64_t>())
      << prompts;
}

}  // namespace lockstep::fault_test

#endif  // LOCKSTEP_TESTS_FAULTS_FAULT_TEST_SUPPORT_H_
