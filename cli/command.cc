// What the commands share: the option checks, the one-line usage error, the help layout; see
// command.h.
#include "cli/command.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <utility>

namespace stallscope::cli {

CLI::Option* parse_with(CLI::Option* option, std::function<std::string(const std::string& value)> take) {
  // A CLI11 validator that reports through UsageError, not through its return value: CLI11 would
  // prefix that with "NAME: " and the line would no longer read as one sentence.
  const std::string name = option->get_name();
  option->check(CLI::Validator(
      [name, take = std::move(take)](std::string& value) {
        const std::string problem = take(value);
        if (!problem.empty()) throw UsageError(name + " " + problem);
        return std::string();
      },
      /*validator_desc=*/""));
  return option;
}

int usage_error(const CLI::App& command, const std::string& what) {
  std::string line = what;
  std::replace(line.begin(), line.end(), '\n', ' ');
  std::string path = command.get_name();
  for (const CLI::App* up = command.get_parent(); up != nullptr; up = up->get_parent())
    path = up->get_name() + " " + path;
  std::fprintf(usage_stream(), "stallscope: %s (see '%s --help')\n", line.c_str(), path.c_str());
  return 2;
}

FILE*& usage_stream() {
  static FILE* stream = stderr;
  return stream;
}

bool parse_count(const std::string& s, unsigned* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  const unsigned long v = std::strtoul(s.c_str(), &end, 10);
  if (*end != '\0' || v == 0 || v > (1ul << 24)) return false;
  *out = static_cast<unsigned>(v);
  return true;
}

bool parse_number(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return *end == '\0';
}

namespace {

// CLI11's formatter with stallscope's layout: the usage line first, options as "-o, --output
// FILE" with long-only options aligned under the long names, and the description column as wide
// as the longest entry needs.
class HelpFormatter : public CLI::Formatter {
 public:
  HelpFormatter(std::string usage, std::string about) : usage_(std::move(usage)), about_(std::move(about)) {
    label("Positionals", "Arguments");
  }

  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode mode) const override {
    column_ = column_for(app);
    std::ostringstream out;
    std::string usage = usage_;
    for (size_t p = usage.find('\n'); p != std::string::npos; p = usage.find('\n', p + 1))
      usage.insert(p + 1, "       ");
    out << get_label("Usage") << ": " << usage << "\n";
    if (!about_.empty()) out << "\n" << about_ << "\n";
    out << make_positionals(app) << make_groups(app, mode) << make_subcommands(app, mode);
    const std::string footer = make_footer(app);
    if (!footer.empty()) out << "\n" << footer;
    return out.str();
  }

  std::string make_option(const CLI::Option* opt, bool positional) const override {
    std::ostringstream out;
    CLI::detail::format_help(out, make_option_name(opt, positional) + make_option_opts(opt), make_option_desc(opt),
                             column_);
    return out.str();
  }

  std::string make_subcommand(const CLI::App* sub) const override {
    std::ostringstream out;
    CLI::detail::format_help(out, sub->get_name(), sub->get_description(), column_);
    return out.str();
  }

  std::string make_option_name(const CLI::Option* opt, bool positional) const override {
    if (positional) return opt->get_name(true, false);
    std::string names = opt->get_snames().empty() ? "    " : "";
    for (const std::string& s : opt->get_snames()) names += "-" + s + ", ";
    for (const std::string& l : opt->get_lnames()) names += "--" + l + ", ";
    return names.substr(0, names.size() - 2);
  }

  // Defaults and environment variables are said in the descriptions, in words.
  std::string make_option_opts(const CLI::Option* opt) const override {
    return opt->get_type_name().empty() ? "" : " " + opt->get_type_name();
  }

 private:
  // Two spaces before the longest option or command name, at least two after.
  size_t column_for(const CLI::App* app) const {
    size_t widest = 0;
    for (const CLI::Option* opt : app->get_options()) {
      widest = std::max(widest, make_option_name(opt, opt->get_positional()).size() + make_option_opts(opt).size());
    }
    for (const CLI::App* sub : app->get_subcommands({})) widest = std::max(widest, sub->get_name().size());
    return widest + 4;
  }

  std::string usage_;
  std::string about_;
  mutable size_t column_ = 30;  // worked out per help page; CLI11's make_* are const
};

}  // namespace

std::shared_ptr<CLI::FormatterBase> help_formatter(std::string usage, std::string about) {
  return std::make_shared<HelpFormatter>(std::move(usage), std::move(about));
}

}  // namespace stallscope::cli
