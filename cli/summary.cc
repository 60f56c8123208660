// End-of-run summary; see summary.h.
#include "cli/summary.h"

#include <cstdio>

#include "analysis/report.h"
#include "analysis/session.h"

void print_summary(const std::string& db_path) {
  try {
    auto session = stallscope::analysis::load_session(db_path);
    if (!session.ok()) return;
    const stallscope::analysis::Report r = stallscope::analysis::analyze(*session);
    std::fputs(stallscope::analysis::short_summary(r).c_str(), stderr);
  } catch (...) {
    // Out of memory on a huge recording, say: the recording itself is saved and fine.
  }
}
