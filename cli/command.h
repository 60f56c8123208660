// What every `stallscope` command shares: how a command describes itself to the top-level app
// (cli/main.cc parses the command line with CLI11 and runs the chosen command's body), the list
// of commands, and the usage-error convention: one line on stderr, `stallscope: WHAT (see
// 'stallscope CMD --help')`, exit status 2.
//
// A new command costs one file, cli/NAME_command.cc, that defines `const Command kNameCommand`
// (its word, help texts and `define`), one line in STALLSCOPE_COMMANDS below, its line in
// cli/CMakeLists.txt, and its docs. Its `--help`, its usage errors and its place in
// `stallscope --help` come from here and main.cc; tests/e2e/cli_test.cc finds it in
// `stallscope --help` and checks its help and usage errors without being edited.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <string>

namespace stallscope::cli {

// What a command does once its command line parsed: returns the exit status (0 ok, 1 failure,
// 2 for a usage error only it can see, printed with usage_error()).
using Body = std::function<int()>;

struct Command {
  const char* name;     // the word after `stallscope`
  const char* summary;  // its line in `stallscope --help`
  const char* usage;    // the forms after "Usage: ", one a line: "stallscope run [OPTIONS] ..."
  const char* about;    // what it does, under the usage line of its --help
  const char* footer;   // after the options in its --help: exit status, examples
  // Declares the command's options and arguments on `app`, bound to settings the returned body
  // owns and reads once parsing is done. Called once, before parsing.
  Body (*define)(CLI::App& app);
};

// Every command, in the order `stallscope --help` lists them: X(Run) stands for kRunCommand,
// defined in cli/run_command.cc. Adding a command is one X(...) here.
#define STALLSCOPE_COMMANDS(X) \
  X(Run)                       \
  X(Attach)                    \
  X(Report)                    \
  X(Compare)                   \
  X(Tune)                      \
  X(Merge)                     \
  X(Export)                    \
  X(Serve)                     \
  X(Top)                       \
  X(Ui)
#define STALLSCOPE_DECLARE_COMMAND(Name) extern const Command k##Name##Command;
#define STALLSCOPE_COMMAND_ADDRESS(Name) &k##Name##Command,
STALLSCOPE_COMMANDS(STALLSCOPE_DECLARE_COMMAND)
inline constexpr const Command* kCommands[] = {STALLSCOPE_COMMANDS(STALLSCOPE_COMMAND_ADDRESS)};
#undef STALLSCOPE_DECLARE_COMMAND
#undef STALLSCOPE_COMMAND_ADDRESS

// A usage error in the command's own words ("--rings needs a positive number"), thrown while the
// command line is parsed (by the checks that parse_with() installs); main.cc prints it as one
// line and exits 2.
class UsageError : public CLI::ParseError {
 public:
  explicit UsageError(const std::string& what) : CLI::ParseError("UsageError", what, 2) {}
};

// Reads `option`'s value with `take`, which stores it in the command's settings and returns ""
// or what is wrong with the value, worded to follow the option's name ("needs a positive number"
// gives the usage error "--rings needs a positive number"). The check runs while CLI11 parses,
// so a bad value is refused wherever it stands on the command line, and for values from an
// environment variable (CLI::Option::envname) too. Returns `option`.
CLI::Option* parse_with(CLI::Option* option, std::function<std::string(const std::string& value)> take);

// Prints `stallscope: WHAT (see 'stallscope CMD --help')` on stderr, as one line, and returns 2.
// `command` is the command's app (its name gives CMD), or the top-level app.
int usage_error(const CLI::App& command, const std::string& what);

// Where usage_error() writes: stderr, unless a test or fuzz target reads the lines itself.
FILE*& usage_stream();

// The whole command line: parses argv with CLI11 into the command it names among `commands`,
// answers --help and --version, and runs the command's body; every parse failure is one
// usage_error() line, exit 2. With execute false it stops once the command line parsed, returning
// 0 (tests/fuzz/fuzz_cli.cc). stallscope-ui (cli/ui_main.cc) runs it with the dashboard's command
// alone, so that its help and usage errors read as `stallscope ui`'s.
int run_commands(std::span<const Command* const> commands, int argc, char** argv, bool execute = true);

// `stallscope`'s command line: every command of kCommands. Inline, so that only the executables
// that call it need every command's code (stallscope-ui links none of them).
inline int run_command_line(int argc, char** argv, bool execute = true) {
  return run_commands(kCommands, argc, argv, execute);
}

// The help layout of every command: "Usage: " and `usage` (one form a line), `about`, then the
// arguments and options as CLI11 lists them ("-o, --output FILE  what it does"), the commands
// (top-level app only) and the footer.
std::shared_ptr<CLI::FormatterBase> help_formatter(std::string usage, std::string about);

// Values shared by several commands' checks.
bool parse_count(const std::string& s, unsigned* out);  // 1 .. 2^24, in decimal (strtoul)
bool parse_number(const std::string& s, double* out);   // a whole string that strtod reads

}  // namespace stallscope::cli
