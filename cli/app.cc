// The `stallscope` command's top-level app (run_commands, cli/command.h). Parses the command
// line with CLI11 into the command it names (cli/command.h lists them; one file each), answers
// --help and --version, runs the command's body, and turns every parse failure into the one-line
// usage error (exit 2). main() is in cli/main.cc.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "cli/command.h"
#include "remote/remote_reader.h"
#include "stallscope/version.h"

namespace stallscope::cli {
namespace {

// The command the parse got to, or the top-level app if it got to none.
const CLI::App& chosen(const CLI::App& app) {
  const std::vector<CLI::App*> subs = app.get_subcommands();
  return subs.empty() ? app : *subs.front();
}

// The first word CLI11 could not place on `app` ("--" aside), or "".
std::string leftover(const CLI::App& app) {
  for (const std::string& w : app.remaining()) {
    if (w != "--") return w;
  }
  return "";
}

bool is_option(const std::string& word) { return word.size() > 1 && word[0] == '-'; }

// -h/--help answers as soon as it is read. CLI11 would otherwise check the values first, and a
// bad one (STALLSCOPE_GPU=bogus, say) would refuse the very --help its message points to.
void help_first(CLI::App& app) {
  app.get_option("--help")->trigger_on_parse()->each([](const std::string&) { throw CLI::CallForHelp(); });
}

// CLI11's failures in stallscope's words; one line, exit 2. --help and --version come here too,
// as CLI11 "errors" with exit code 0. Told apart by type: CLI11 2.1's ExtrasError gives the app's
// name as its error name.
int parse_failure(const CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == 0) return app.exit(e);  // help to stdout, version to stdout
  const CLI::App& cmd = chosen(app);
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && &cmd == &app) {  // no command
    const std::string word = leftover(app);
    if (word.empty()) return usage_error(app, "no command given");
    return usage_error(app, (is_option(word) ? "unknown option '" : "unknown command '") + word + "'");
  }
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    // On the command: its unknown option or extra argument. On the top-level app: an unknown
    // option before the command, or a word after a `--` that the command had no argument for.
    std::string word = leftover(cmd);
    if (!word.empty())
      return usage_error(cmd, (is_option(word) ? "unknown option '" : "unexpected argument '") + word + "'");
    word = leftover(app);
    if (is_option(word)) return usage_error(app, "unknown option '" + word + "'");
    if (!word.empty()) return usage_error(cmd, "unexpected argument '" + word + "'");
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {  // "--output: 1 required FILE missing"
    const std::string what = e.what();
    const size_t colon = what.find(": ");
    const size_t required = what.find(" required ");
    if (colon != std::string::npos && required != std::string::npos && what.size() > 8 &&
        what.compare(what.size() - 8, 8, " missing") == 0) {
      const std::string type = what.substr(required + 10, what.size() - 8 - (required + 10));
      return usage_error(cmd, what.substr(0, colon) + " needs a value" + (type.empty() ? "" : " (" + type + ")"));
    }
  }
  return usage_error(cmd, e.what());  // UsageError (our own words), and what CLI11 says otherwise
}

}  // namespace

int run_commands(std::span<const Command* const> commands, int argc, char** argv, bool execute) {
  remote::install();  // recordings named by ssh:// and tcp:// URIs open wherever files do
  const std::string version = std::string("stallscope ") + STALLSCOPE_VERSION;
  CLI::App app("", "stallscope");
  app.formatter(help_formatter("stallscope [--help] [--version] COMMAND [ARGS...]",
                               version + " - see why a training job's GPU waits for its input pipeline"));
  app.footer("Run 'stallscope COMMAND --help' for a command's options.");
  app.set_help_flag("-h,--help", "show this help");
  app.set_version_flag("-V,--version", version, "print the version");
  app.require_subcommand(1);
  help_first(app);

  std::vector<std::pair<const CLI::App*, Body>> bodies;
  for (const Command* c : commands) {
    CLI::App* sub = app.add_subcommand(c->name, c->summary)->group("Commands");
    sub->formatter(help_formatter(c->usage, c->about));
    sub->footer(c->footer);
    help_first(*sub);
    bodies.emplace_back(sub, c->define(*sub));
  }
  // `stallscope help`, as --help; unlisted (no group).
  CLI::App* help = app.add_subcommand("help", "")->group("")->allow_extras();
  help->set_help_flag();  // `stallscope help --help` is the top-level help too
  bodies.emplace_back(help, [&app] {
    std::fputs(app.get_formatter()->make_help(&app, "", CLI::AppFormatMode::Normal).c_str(), stdout);
    return 0;
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return parse_failure(app, e);
  }
  if (!execute) return 0;
  for (const auto& [sub, body] : bodies) {
    if (sub->parsed()) return body();
  }
  return usage_error(app, "no command given");  // require_subcommand(1) makes this unreachable
}

}  // namespace stallscope::cli
