// Reading a `stallscope tune` folder for the dashboard; see tune_set.h.
#include "ui/tune_set.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "common/json.h"

namespace stallscope::ui {
namespace {

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string base_name(const std::string& p) {
  const size_t s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

std::string settings_text(const Json& t) {
  if (json::get_string(t, "loader").value_or("") == "reference") return "reference loader";
  const std::optional<std::string> preload = json::get_string(t, "preload");  // an allocator preloaded
  const std::string with = preload ? " + " + base_name(*preload) : "";
  if (auto a = json::get_string(t, "arguments")) return *a + with;
  return "the script's settings" + with;
}

std::optional<double> figure(const Json& t, const char* what, const char* key) {
  if (!t.is_object() || !t.contains(what) || !t[what].is_object()) return std::nullopt;
  return json::get_double(t[what], key);
}

TuneRun run_of(const Json& t, const std::string& dir) {
  TuneRun r;
  r.settings = settings_text(t);
  r.status = json::get_string(t, "status").value_or("?");
  r.samples_per_s = figure(t, "measured", "samples_per_s");
  r.stall = figure(t, "measured", "stall");
  r.predicted_samples_per_s = figure(t, "predicted", "samples_per_s");
  r.predicted_stall = figure(t, "predicted", "stall");
  r.whole_samples_per_s = figure(t, "whole_run", "samples_per_s");
  r.steps = json::get_int(t, "steps").value_or(0);
  r.recording = json::get_string(t, "recording").value_or("");
  if (!r.recording.empty() && !exists(r.recording)) {
    const std::string here = dir + "/" + base_name(r.recording);
    if (exists(here)) r.recording = here;
  }
  r.file = base_name(r.recording);
  if (r.file.size() > 3 && r.file.compare(r.file.size() - 3, 3, ".db") == 0) r.file.resize(r.file.size() - 3);
  const size_t dash = r.file.find('-');
  r.name = dash != std::string::npos && dash > 0 ? r.file.substr(0, dash) : r.file;
  return r;
}

}  // namespace

int TuneSet::first_b() const {
  if (winner != 0) return winner;
  for (size_t i = 1; i < runs.size(); ++i) {
    if (runs[i].samples_per_s) return static_cast<int>(i);
  }
  return 0;
}

std::optional<int> TuneSet::find(const std::string& name) const {
  for (size_t i = 0; i < runs.size(); ++i) {
    const TuneRun& r = runs[i];
    const bool number = !name.empty() && name.find_first_not_of("0123456789") == std::string::npos &&
                        r.name.find_first_not_of("0123456789") == std::string::npos && !r.name.empty() &&
                        std::stoll(name.substr(0, 9)) == std::stoll(r.name.substr(0, 9));
    const std::string b = base_name(name);
    if (number || name == r.name || b == r.file || b == r.file + ".db" || name == r.recording) {
      return static_cast<int>(i);
    }
  }
  return std::nullopt;
}

Result<TuneSet> load_tune_set(const std::string& dir_in) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string path = dir + "/tune.json";
  std::ifstream f(path);
  if (!f) {
    return Status::Error("'" + dir + "' is a folder without tune.json; pass a recording (.db), or a folder " +
                         "`stallscope tune -o` wrote");
  }
  std::stringstream text;
  text << f.rdbuf();
  auto doc = json::parse(text.str());
  const bool tune = doc.ok() && doc->is_object() && json::get_string(*doc, "schema") == "stallscope.tune/1" &&
                    doc->contains("baseline") && (*doc)["baseline"].is_object();
  if (!tune) {
    return Status::Error(path + " is not a tune document (schema stallscope.tune/1); pass a recording (.db)");
  }
  TuneSet set;
  set.dir = dir;
  std::vector<std::optional<std::string>> written;  // each run's recording as tune.json has it
  auto add = [&](const Json& t) {
    set.runs.push_back(run_of(t, dir));
    written.push_back(json::get_string(t, "recording"));
  };
  add((*doc)["baseline"]);
  set.runs[0].baseline = true;
  if (doc->contains("candidates") && (*doc)["candidates"].is_array()) {
    for (const Json& c : (*doc)["candidates"]) {
      if (c.is_object()) add(c);
    }
  }
  std::optional<std::string> won;
  if (doc->contains("winner") && (*doc)["winner"].is_object()) won = json::get_string((*doc)["winner"], "recording");
  for (size_t i = 0; won && i < set.runs.size(); ++i) {
    if (written[i] == won) {
      set.winner = static_cast<int>(i);
      break;
    }
  }
  set.runs[static_cast<size_t>(set.winner)].winner = true;
  for (const TuneRun& r : set.runs) {
    if (r.recording.empty()) return Status::Error(path + ": the run '" + r.name + "' names no recording");
  }
  return set;
}

}  // namespace stallscope::ui
