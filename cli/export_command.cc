// `stallscope export FILE.db [--format perfetto|csv] [-o OUT] [--range T0:T1] [--force]`: writes a recording in a
// format other tools read (export/trace_export.h). The Perfetto trace goes to a temporary file
// beside OUT, renamed over it once complete, so a failed export leaves no half-written trace.
// Errors: a recording that cannot be read or an output that cannot be written, one line and exit 1;
// usage errors one line and exit 2.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/command.h"
#include "cli/recording_input.h"
#include "cli/recording_options.h"
#include "export/csv.h"
#include "export/perfetto_json.h"
#include "storage/reader.h"

namespace stallscope::cli {
namespace {

struct ExportArgs {
  std::string format = "perfetto";
  std::string output;
  bool force = false;
  bool quiet = false;
  std::optional<std::pair<int64_t, int64_t>> range;  // --range, in ns
  std::vector<std::string> files;
};

std::string default_output(const std::string& db, const std::string& format) {
  std::string stem = db;
  if (stem.size() > 3 && stem.compare(stem.size() - 3, 3, ".db") == 0) stem.resize(stem.size() - 3);
  return format == "csv" ? stem + "-csv" : stem + ".json";
}

int write_error(const std::string& what) {
  std::fprintf(stderr, "stallscope: %s; choose another -o or free some space\n", what.c_str());
  return 1;
}

int run_export(const CLI::App& app, const ExportArgs& a) {
  const std::string& db = a.files[0];
  const std::string out = a.output.empty() ? default_output(db, a.format) : a.output;
  const bool to_stdout = out == "-";
  if (to_stdout && a.format == "csv") return usage_error(app, "--format csv writes a folder; give it with -o DIR");
  struct stat st;
  const bool exists = !to_stdout && ::stat(out.c_str(), &st) == 0;
  if (a.format == "csv") {
    if (exists && !S_ISDIR(st.st_mode)) return usage_error(app, out + " exists and is not a folder; choose another -o");
    if (exists && !a.force && ::access((out + "/spans.csv").c_str(), F_OK) == 0)
      return usage_error(app, out + " holds an export already; pass --force to overwrite it or choose another -o");
  } else if (exists && !a.force) {
    return usage_error(app, out + " exists; pass --force to overwrite it or choose another -o");
  }

  auto reader = Reader::open(db);
  if (!reader.ok()) return read_error(reader.status().message());

  exporting::ExportOptions options;
  options.range = a.range;
  Result<exporting::ExportCounts> counts = Status::Error("");
  std::string tmp;
  if (a.format == "csv") {
    if (!exists && ::mkdir(out.c_str(), 0755) != 0)
      return write_error("cannot create " + out + ": " + std::strerror(errno));
    auto sink = exporting::csv_sink(out);
    counts = exporting::export_recording(**reader, *sink, options);
  } else {
    std::FILE* f = stdout;
    if (!to_stdout) {
      tmp = out + ".partial";
      f = std::fopen(tmp.c_str(), "w");
      if (f == nullptr) return write_error("cannot write " + tmp + ": " + std::strerror(errno));
    }
    auto sink = exporting::perfetto_json_sink(f);
    counts = exporting::export_recording(**reader, *sink, options);
    if (!to_stdout && std::fclose(f) != 0 && counts.ok())
      counts = Status::Error(std::string("write failed: ") + std::strerror(errno));
    if (!to_stdout && counts.ok() && std::rename(tmp.c_str(), out.c_str()) != 0)
      counts = Status::Error("cannot rename " + tmp + " to " + out + ": " + std::strerror(errno));
    if (!to_stdout && !counts.ok()) (void)::unlink(tmp.c_str());
  }
  if (!counts.ok()) {
    const std::string& m = counts.status().message();
    if (m.rfind("write failed", 0) == 0 || m.rfind("cannot write", 0) == 0 || m.rfind("cannot rename", 0) == 0)
      return write_error(out + ": " + m);
    return read_error(m);
  }
  if (!a.quiet && !to_stdout) {
    const exporting::ExportCounts& n = *counts;
    std::fprintf(stderr, "stallscope: wrote %s: %lld spans, %lld instants, %lld counter samples, %lld GPU activities",
                 out.c_str(), static_cast<long long>(n.spans), static_cast<long long>(n.instants),
                 static_cast<long long>(n.counters), static_cast<long long>(n.gpu_activities));
    if (a.format == "perfetto") std::fprintf(stderr, ", %lld batch flows", static_cast<long long>(n.flows));
    std::fputc('\n', stderr);
  }
  return 0;
}

Body define(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  parse_with(app.add_option("-f,--format",
                            "perfetto (default): the Chrome/Perfetto JSON trace format, for ui.perfetto.dev\n"
                            "and chrome://tracing; csv: a folder of CSV files, one per table")
                 ->type_name("FORMAT"),
             [a](const std::string& v) -> std::string {
               if (v != "perfetto" && v != "csv") return "'" + v + "': unknown format; use perfetto or csv";
               a->format = v;
               return "";
             });
  parse_with(app.add_option("-o,--output",
                            "where to write: a .json file for perfetto ('-': standard output), a folder\n"
                            "for csv (made if missing). Default: FILE.json, or the folder FILE-csv")
                 ->type_name("OUT"),
             [a](const std::string& v) -> std::string {
               if (v.empty()) return "needs a file or folder name";
               a->output = v;
               return "";
             });
  parse_with(app.add_option("--range",
                            "only T0:T1, seconds since the session start: the spans that overlap it and the\n"
                            "other rows in it (a part of a long recording that a trace viewer can open)")
                 ->type_name("T0:T1"),
             [a](const std::string& v) -> std::string {
               const size_t colon = v.find(':');
               double t0 = 0, t1 = 0;
               if (colon == std::string::npos || !parse_number(v.substr(0, colon), &t0) ||
                   !parse_number(v.substr(colon + 1), &t1) || !(t1 > t0) || t0 < -1e9 || t1 > 1e9) {
                 return "needs T0:T1 in seconds since the session start, T0 < T1 (e.g. 3600:3660)";
               }
               a->range = std::make_pair(static_cast<int64_t>(t0 * 1e9), static_cast<int64_t>(t1 * 1e9));
               return "";
             });
  app.add_flag("--force", a->force, "replace an existing trace file, or the CSV files in an existing folder");
  app.add_flag("-q,--quiet", a->quiet, "print nothing but errors");
  app.add_option("FILE.db", a->files, "the recording")->type_name("");
  return [&app, a] {
    if (a->files.empty())
      return usage_error(app, "export: no recording given; usage: stallscope export FILE.db [-o OUT]");
    if (a->files.size() > 1) {
      return usage_error(app, "export: one recording at a time; got '" + a->files[0] + "' and '" + a->files[1] + "'");
    }
    return run_export(app, *a);
  };
}

}  // namespace

const Command kExportCommand = {
    "export",
    "write a recording as a Perfetto/Chrome trace or as CSV files",
    "stallscope export [--format perfetto|csv] [-o OUT] [--range T0:T1] [--force] FILE.db",
    "Writes a recording (finished, or still being written: what it holds now) in a format other\n"
    "tools read. perfetto: the Chrome/Perfetto JSON trace format; open it at ui.perfetto.dev or in\n"
    "chrome://tracing. Processes and threads are named like the dashboard's lanes; spans, instants,\n"
    "/proc counters, when the loop waited for data and the DataLoader's queue depth become tracks;\n"
    "each batch's life is an arrow from where it was sent, through its worker, to where the loop\n"
    "got it; GPU kernels and copies have tracks of their own. csv: spans, instants, counters, GPU\n"
    "activities and processes as CSV files with a header. Rows stream out: memory does not grow\n"
    "with the recording's size, and --range exports a part of a long recording at the cost of what\n"
    "that part holds. The formats are described in docs/export.md.",
    "Exit status: 0 on success, 1 when FILE.db cannot be read or OUT cannot be written, 2 on usage\n"
    "errors.\n"
    "\n"
    "Examples:\n"
    "  stallscope export run.db -o run.json          # then open run.json at ui.perfetto.dev\n"
    "  stallscope export --format csv run.db -o run-csv\n"
    "  stallscope export --range 3600:3660 day.db -o minute.json   # one minute, an hour in",
    define,
};

}  // namespace stallscope::cli
