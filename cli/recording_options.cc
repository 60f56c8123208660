// The options shared by the commands that record; see recording_options.h.
#include "cli/recording_options.h"

#include <sys/stat.h>

#include "cli/command.h"

namespace stallscope::cli {

void add_recording_options(CLI::App& app, RecordingSettings s) {
  parse_with(app.add_option("-o,--output",
                            "database to write (default: stallscope-PROG-[rankR-]YYYYmmdd-HHMMSS.db here, with the\n"
                            "rank when RANK is set; in run, {rank} in FILE becomes RANK)")
                 ->type_name("FILE"),
             [&out = s.output](const std::string& v) -> std::string {
               if (v.empty()) return "needs a file name";
               if (v.back() == '/') return "needs a file name, not a directory";
               out = v;
               return "";
             });
  app.add_flag("--force", s.force, "replace the -o file (and its -wal/-shm files) if it exists");
  parse_with(app.add_option("--ring-events", "events buffered per thread between flushes (power of two, default 16384)")
                 ->type_name("N"),
             [&out = s.ring_events](const std::string& v) -> std::string {
               unsigned n = 0;
               if (!parse_count(v, &n)) return "needs a positive number";
               if ((n & (n - 1)) != 0) return "must be a power of two";
               out = n;
               return "";
             });
  parse_with(app.add_option("--rings", "threads that can record at once (default 64)")->type_name("N"),
             [&out = s.rings](const std::string& v) { return parse_count(v, &out) ? "" : "needs a positive number"; });
  parse_with(app.add_option("--keep-detail",
                            "keep every event of the latest DURATION only (30m, 6h, 2d; at least 10s), and the\n"
                            "summaries of the whole run: bounded disk for a run of days (docs/schema.md)")
                 ->type_name("DURATION"),
             [&out = s.keep_detail_ns](const std::string& v) -> std::string {
               const std::optional<int64_t> ns = parse_duration_ns(v);
               if (!ns) return "needs a duration such as 30m, 6h or 2d";
               if (*ns < kMinKeepDetailNs) return "must be at least 10s: less leaves the report too little to read";
               out = *ns;
               return "";
             });
  app.add_flag("-q,--quiet", s.quiet, "print nothing but errors");
}

std::optional<int64_t> parse_duration_ns(const std::string& v) {
  if (v.empty() || v.size() > 24) return std::nullopt;
  size_t used = 0;
  double n = 0;
  try {
    n = std::stod(v, &used);
  } catch (...) {
    return std::nullopt;
  }
  const std::string unit = v.substr(used);
  double scale = 0;
  if (unit == "s" || unit.empty()) scale = 1;
  if (unit == "m" || unit == "min") scale = 60;
  if (unit == "h") scale = 3600;
  if (unit == "d") scale = 86400;
  const double ns = n * scale * 1e9;
  if (scale == 0 || !(n > 0) || !(ns < 9.2e18)) return std::nullopt;
  return static_cast<int64_t>(ns);
}

int check_output(const CLI::App& app, const std::string& output, bool force) {
  struct stat st;
  if (output.empty() || force || ::lstat(output.c_str(), &st) != 0) return 0;
  return usage_error(app, output + " exists; pass --force to overwrite it or choose another -o");
}

}  // namespace stallscope::cli
