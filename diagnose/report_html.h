// The HTML form of a DiagnoseReport: one self-contained page (inline CSS and SVG, no scripts,
// nothing fetched) with the verdict, the first divergence, a layer × op heat map of max |Δ|
// and per-sequence |Δlogprob| bars.
#ifndef LOCKSTEP_DIAGNOSE_REPORT_HTML_H_
#define LOCKSTEP_DIAGNOSE_REPORT_HTML_H_

#include <string>

#include "diagnose/diagnose_report.h"

namespace lockstep::diagnose {

std::string ReportToHtml(const DiagnoseReport& report);

}  // namespace lockstep::diagnose

#endif  // LOCKSTEP_DIAGNOSE_REPORT_HTML_H_
