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
  app.add_flag("-q,--quiet", s.quiet, "print nothing but errors");
}

int check_output(const CLI::App& app, const std::string& output, bool force) {
  struct stat st;
  if (output.empty() || force || ::lstat(output.c_str(), &st) != 0) return 0;
  return usage_error(app, output + " exists; pass --force to overwrite it or choose another -o");
}

}  // namespace stallscope::cli
