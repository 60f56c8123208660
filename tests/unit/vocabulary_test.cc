// The vocabulary (common/vocabulary.h) is the one home of every name: these tests fail when the
// Python hooks or the docs use an event or counter name it does not have, when a name it has is
// not documented, and when a look-up disagrees with the tables.
#include "common/vocabulary.h"

#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace stallscope {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path source(const char* rel) { return fs::path(STALLSCOPE_SOURCE_DIR) / rel; }

bool known(const std::string& name) {
  return vocab::event_of(name) != vocab::Event::kNone || vocab::counter_of(name) != vocab::Counter::kNone;
}

// Names of events and counters as they appear in text: dl.next, proc.cpu, cuda.cudaMemcpy,
// nvtx.start, stallscope.hooks.
const std::regex kNameLike(R"(\b((?:dl|proc|cuda|nvtx)\.[A-Za-z_]+|stallscope\.hooks)\b)");

TEST(VocabularyTest, LookUpsAgreeWithTheTables) {
  for (const vocab::EventDef& e : vocab::kEvents) {
    if (e.id == vocab::Event::kNone) continue;
    EXPECT_EQ(vocab::event_of(e.name), e.id) << e.name;
    EXPECT_EQ(vocab::name_of(e.id), e.name);
  }
  for (const vocab::CounterDef& c : vocab::kCounters) {
    if (c.id == vocab::Counter::kNone) continue;
    EXPECT_EQ(vocab::counter_of(c.name), c.id) << c.name;
    EXPECT_FALSE(vocab::unit_of(c.id).empty()) << c.name;
  }
  EXPECT_EQ(vocab::event_of("dl.nope"), vocab::Event::kNone);
  EXPECT_EQ(vocab::event_of(""), vocab::Event::kNone);
  EXPECT_TRUE(vocab::is_dataloader(vocab::Event::kDlPut));
  EXPECT_TRUE(vocab::is_dataloader(vocab::Event::kHooks));
  EXPECT_FALSE(vocab::is_dataloader(vocab::Event::kNvtxStart));
  EXPECT_TRUE(vocab::is_cuda_call(vocab::Event::kCudaMemcpyAsync));
  EXPECT_FALSE(vocab::is_cuda_call(vocab::Event::kDlNext));
  EXPECT_EQ(vocab::severity_rank(vocab::kSeverityHigh), 0);
  EXPECT_EQ(vocab::severity_rank(vocab::kSeverityLow), 2);
}

TEST(VocabularyTest, NameTableMapsStringIds) {
  vocab::NameTable t;
  t.add(3, "dl.next");
  t.add(1, "my nvtx range");
  t.add(9, "cuda.cudaMemcpy");
  EXPECT_EQ(t.event(3), vocab::Event::kDlNext);
  EXPECT_EQ(t.event(1), vocab::Event::kNone);
  EXPECT_EQ(t.event(9), vocab::Event::kCudaMemcpy);
  EXPECT_EQ(t.event(2), vocab::Event::kNone);
  EXPECT_EQ(t.event(1000), vocab::Event::kNone);
  // A damaged file's huge id is remembered without a table of that size.
  t.add(4'000'000'000u, "dl.next");
  EXPECT_EQ(t.event(4'000'000'000u), vocab::Event::kDlNext);
  EXPECT_EQ(t.event(3'999'999'999u), vocab::Event::kNone);
  t.add(4'000'000'000u, "renamed");
  EXPECT_EQ(t.event(4'000'000'000u), vocab::Event::kNone);
}

// docs/events.md documents every event and counter of the vocabulary, and names no other.
TEST(VocabularyTest, EventsDocMatchesTheVocabulary) {
  const std::string doc = slurp(source("docs/events.md"));
  ASSERT_FALSE(doc.empty());
  for (const vocab::EventDef& e : vocab::kEvents) {
    if (e.id == vocab::Event::kNone) continue;
    EXPECT_NE(doc.find("`" + std::string(e.name) + "`"), std::string::npos) << e.name << " is not in docs/events.md";
  }
  for (const vocab::CounterDef& c : vocab::kCounters) {
    if (c.id == vocab::Counter::kNone) continue;
    EXPECT_NE(doc.find("`" + std::string(c.name) + "`"), std::string::npos) << c.name << " is not in docs/events.md";
  }
  int seen = 0;
  for (std::sregex_iterator it(doc.begin(), doc.end(), kNameLike), end; it != end; ++it, ++seen) {
    EXPECT_TRUE(known((*it)[1])) << "docs/events.md names " << (*it)[1] << ", which common/vocabulary.h does not have";
  }
  EXPECT_GT(seen, 20);
}

// What a cell of an argument column of docs/events.md says, as a vocabulary Arg.
std::optional<vocab::Arg> arg_of_cell(std::string cell) {
  while (!cell.empty() && cell.front() == ' ') cell.erase(cell.begin());
  while (!cell.empty() && cell.back() == ' ') cell.pop_back();
  using vocab::Arg;
  if (cell == "-") return Arg::kNone;
  if (cell == "L") return Arg::kLoader;
  if (cell == "E") return Arg::kEpoch;
  if (cell == "B") return Arg::kBatch;
  if (cell == "W" || cell == "-1") return Arg::kWorker;  // -1: W of the main process
  if (cell == "G") return Arg::kGeneration;
  if (cell == "pid") return Arg::kPid;
  if (cell == "samples") return Arg::kSamples;
  if (cell == "num_workers" || cell == "batches yielded" || cell == "world size" || cell == "tensors" ||
      cell == "regions")
    return Arg::kCount;
  if (cell == "rank") return Arg::kRank;
  if (cell == "seq") return Arg::kSeq;
  if (cell == "category") return Arg::kCategory;
  if (cell == "range id") return Arg::kRangeId;
  if (cell == "domain id") return Arg::kDomain;
  if (cell.rfind("string id of", 0) == 0 || cell == "message string id") return Arg::kText;
  if (cell == "read us" || cell == "decode us" || cell == "augment us" || cell == "CPU us" || cell == "CPU us before" ||
      cell == "others' CPU us" || cell == "bodies us" || cell == "regions us") {
    return Arg::kMicros;
  }
  if (cell == "bytes") return Arg::kBytes;
  return std::nullopt;
}

// The argument layouts in the vocabulary are the tables of docs/events.md: each row of a named
// event gives its kind and arg0..arg2 (in the worker section: the worker layout).
TEST(VocabularyTest, ArgumentLayoutsMatchTheEventsDoc) {
  std::ifstream in(source("docs/events.md"));
  ASSERT_TRUE(in);
  std::string line;
  bool worker_section = false;
  int rows = 0;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) worker_section = line.find("Worker processes") != std::string::npos;
    if (line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line.substr(1));
    for (std::string c; std::getline(ss, c, '|');) cells.push_back(c);
    if (cells.size() < 5) continue;
    std::string name = cells[0];
    name = name.substr(name.find('`') + 1);
    name = name.substr(0, name.find('`'));
    const vocab::Event e = vocab::event_of(name);
    if (e == vocab::Event::kNone) continue;  // counters, and rows that are not events
    ++rows;
    const vocab::EventDef& def = vocab::kEvents[static_cast<size_t>(e)];
    const std::string kind = cells[1].substr(cells[1].find_first_not_of(' '), 4);
    EXPECT_EQ(kind == "span" ? vocab::Shape::kSpan : vocab::Shape::kInstant, def.shape) << name;
    const vocab::Args& layout = worker_section ? vocab::args_of(e, true) : def.args;
    for (size_t i = 0; i < 3; ++i) {
      const std::optional<vocab::Arg> doc = arg_of_cell(cells[2 + i]);
      ASSERT_TRUE(doc.has_value()) << name << " arg" << i << ": docs/events.md says '" << cells[2 + i]
                                   << "', which this test cannot map to an Arg";
      EXPECT_EQ(*doc, layout[i]) << name << " arg" << i << (worker_section ? " (worker)" : "");
    }
  }
  EXPECT_GE(rows, 17);  // every dl.* row (fetch and collate twice), stallscope.hooks, nvtx.start/end
}

// docs/report.md documents every recommendation and every stall cause.
TEST(VocabularyTest, ReportDocHasEveryRecommendationAndCause) {
  const std::string doc = slurp(source("docs/report.md"));
  ASSERT_FALSE(doc.empty());
  for (const char* id : vocab::kRecommendationIds) {
    EXPECT_NE(doc.find("| `" + std::string(id) + "` |"), std::string::npos) << id << " has no row in docs/report.md";
  }
  for (const char* cause : vocab::kCauses) {
    EXPECT_NE(doc.find("`" + std::string(cause) + "`"), std::string::npos) << cause << " is not in docs/report.md";
  }
}

// The loader kinds: python/stallscope/_vocab.py has the same ones, in the same order, and
// docs/report.md names each.
TEST(VocabularyTest, LoaderKindsAgreeWithPythonAndTheDocs) {
  const std::string py = slurp(source("python/stallscope/_vocab.py"));
  const std::string doc = slurp(source("docs/report.md"));
  std::vector<std::string> names;
  for (const char* kind : vocab::kLoaderKinds) {
    std::string upper = kind;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    names.push_back("LOADER_" + upper);
    EXPECT_NE(py.find("LOADER_" + upper + " = \"" + kind + "\""), std::string::npos) << kind << " is not in _vocab.py";
    EXPECT_NE(doc.find("`" + std::string(kind) + "`"), std::string::npos) << kind << " is not in docs/report.md";
  }
  std::string tuple = "LOADER_KINDS = (";
  for (size_t i = 0; i < names.size(); ++i) tuple += (i ? ", " : "") + names[i];
  EXPECT_NE(py.find(tuple + ")"), std::string::npos) << "_vocab.py's LOADER_KINDS differs from kLoaderKinds";
}

// The Python side writes only vocabulary names, and (once python/stallscope/_vocab.py holds
// them) only through that module.
TEST(VocabularyTest, PythonHooksUseOnlyVocabularyNames) {
  const fs::path pkg = source("python/stallscope");
  ASSERT_TRUE(fs::is_directory(pkg));
  const bool has_vocab_module = fs::exists(pkg / "_vocab.py");
  // A quoted name: "dl.next" or 'dl.next'.
  const std::regex quoted(R"(["']((?:dl|proc|cuda|nvtx)\.[A-Za-z_]+|stallscope\.hooks)["'])");
  int names = 0;
  for (const auto& entry : fs::recursive_directory_iterator(pkg)) {
    if (entry.path().extension() != ".py") continue;
    const std::string text = slurp(entry.path());
    const bool is_vocab = entry.path().filename() == "_vocab.py";
    for (std::sregex_iterator it(text.begin(), text.end(), quoted), end; it != end; ++it) {
      const std::string name = (*it)[1];
      // `stallscope.hooks` is also the hooks package's module name, used as such outside _vocab.
      if (name == "stallscope.hooks" && !is_vocab) continue;
      ++names;
      EXPECT_TRUE(known(name)) << entry.path() << " writes " << name << ", which common/vocabulary.h does not have";
      if (has_vocab_module) {
        EXPECT_TRUE(is_vocab) << entry.path() << " spells out " << name << "; use the constant in stallscope/_vocab.py";
      }
    }
  }
  EXPECT_GE(names, 13);  // the dl.* events at least
}

}  // namespace
}  // namespace stallscope
