// The median the benchmarks report: the middle value, of an even count the upper of the two
// middle ones. `values` must not be empty.
#ifndef LOCKSTEP_BENCH_MEDIAN_H_
#define LOCKSTEP_BENCH_MEDIAN_H_

#include <algorithm>
#include <vector>

namespace lockstep::bench {

inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace lockstep::bench

#endif  // LOCKSTEP_BENCH_MEDIAN_H_
