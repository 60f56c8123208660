// `stallscope merge A.db B.db ... -o JOB.db [--force]`: one recording of a job from the
// recordings of its parts (storage/merge.h), then one line per input saying how its clock was
// aligned. Errors: an input that cannot be read or an output that cannot be written, one line and
// exit 1; usage errors one line and exit 2.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/recording_input.h"
#include "storage/merge.h"
#include "storage/writer.h"

namespace stallscope::cli {
namespace {

struct MergeArgs {
  std::string output;
  bool force = false;
  bool quiet = false;
  bool allow_mismatch = false;
  std::vector<std::string> files;
};

std::string how(const MergedInput& m) {
  char buf[160];
  if (m.clock == "base") return "the time base";
  if (m.clock == "same host") {
    std::snprintf(buf, sizeof buf, "%+.6f s, same host: one monotonic clock (exact)",
                  static_cast<double>(m.offset_ns) / 1e9);
  } else if (m.clock == "collectives") {
    std::snprintf(buf, sizeof buf, "%+.6f s, host %s: realtime refined by %lld collectives (residual %.1f us)",
                  static_cast<double>(m.offset_ns) / 1e9, m.host.c_str(), static_cast<long long>(m.matched),
                  static_cast<double>(m.residual_ns) / 1e3);
  } else {
    std::snprintf(buf, sizeof buf,
                  "%+.6f s, host %s: realtime clocks only (no collective on both sides; error: the hosts' NTP "
                  "offset, typically milliseconds)",
                  static_cast<double>(m.offset_ns) / 1e9, m.host.c_str());
  }
  return buf;
}

Body define(CLI::App& app) {
  auto a = std::make_shared<MergeArgs>();
  parse_with(app.add_option("-o,--output", "the merged recording to write")->type_name("FILE"),
             [a](const std::string& v) -> std::string {
               if (v.empty()) return "needs a file name";
               a->output = v;
               return "";
             });
  app.add_flag("--force", a->force, "replace the -o file (and its -wal/-shm files) if it exists");
  app.add_flag("--allow-mismatch", a->allow_mismatch,
               "merge recordings whose job ids or world sizes differ, or that hold the same rank");
  app.add_flag("-q,--quiet", a->quiet, "print nothing but errors");
  app.add_option("FILES.db", a->files, "the recordings of the job's parts (two or more)")->type_name("");
  return [&app, a] {
    if (a->files.size() < 2)
      return usage_error(app, "merge: give two recordings or more; usage: stallscope merge A.db B.db -o JOB.db");
    if (a->output.empty()) return usage_error(app, "merge: -o JOB.db is required");
    for (const std::string& f : a->files) {
      if (f == a->output) return usage_error(app, "merge: -o " + f + " is also an input; choose another -o");
    }
    if (a->force) {
      if (Status s = Writer::remove(a->output); !s.ok()) {
        std::fprintf(stderr, "stallscope: %s\n", s.message().c_str());
        return 1;
      }
    } else if (FILE* f = std::fopen(a->output.c_str(), "r")) {
      std::fclose(f);
      return usage_error(app, a->output + " exists; pass --force to overwrite it or choose another -o");
    }
    auto merged = merge_recordings(a->files, a->output, a->allow_mismatch);
    if (!merged.ok()) {
      (void)Writer::remove(a->output);  // nothing half-written stays behind
      return read_error(merged.status().message());
    }
    if (!a->quiet) {
      for (const MergedInput& m : *merged) {
        std::fprintf(stderr, "stallscope: %s: %lld spans, %lld instants; clock %s\n", m.path.c_str(),
                     static_cast<long long>(m.spans), static_cast<long long>(m.instants), how(m).c_str());
      }
      std::fprintf(stderr, "stallscope: wrote %s; see it with 'stallscope report %s'\n", a->output.c_str(),
                   a->output.c_str());
    }
    return 0;
  };
}

}  // namespace

const Command kMergeCommand = {
    "merge",
    "one recording of a multi-rank job from the recordings of its ranks or nodes",
    "stallscope merge [--force] [--allow-mismatch] A.db B.db [C.db ...] -o JOB.db",
    "Merges the recordings of a job's parts (one per rank when each rank ran its own\n"
    "'stallscope run', or one per node) into one recording, ranks and nodes kept apart, on the\n"
    "first recording's clock. Recordings from one host share the monotonic clock (exact); across\n"
    "hosts the realtime clocks give the offset, refined by the collectives every rank records,\n"
    "and the residual error is printed. Recordings of different jobs (the job ids that\n"
    "'stallscope run' records under torchrun), of different world sizes, or two of one rank are\n"
    "refused. 'stallscope report JOB.db' then shows each rank and the\n"
    "slowest one. Described in docs/report.md (Ranks) and docs/schema.md (meta merged_from).",
    "Exit status: 0 on success, 1 when an input cannot be read or JOB.db cannot be written, 2 on\n"
    "usage errors.\n"
    "\n"
    "Examples:\n"
    "  stallscope merge run-rank0.db run-rank1.db -o job.db\n"
    "  stallscope report job.db",
    define,
};

}  // namespace stallscope::cli
