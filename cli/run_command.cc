// `stallscope run [OPTIONS] [--] PROGRAM [ARGS...]`: starts PROGRAM with the collector preloaded
// and records it (inject/launcher.h). Its options end at `--` or at the first word that is not an
// option, so `stallscope run python train.py --epochs 2` passes `--epochs 2` to the program.
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "analysis/loader_tuning.h"
#include "analysis/tune.h"
#include "cli/command.h"
#include "cli/metrics_options.h"
#include "cli/recording_options.h"
#include "cli/summary.h"
#include "collector/gpu_choice.h"
#include "common/cpus.h"
#include "common/vocabulary.h"
#include "inject/launcher.h"
#include "storage/writer.h"

namespace stallscope::cli {
namespace {

Body define(CLI::App& app) {
  auto opt = std::make_shared<RunOptions>();
  auto gpu = std::make_shared<std::string>();
  auto metrics = std::make_shared<MetricsSettings>();
  add_recording_options(app,
                        {opt->output, opt->overwrite, opt->ring_events, opt->rings, opt->quiet, opt->keep_detail_ns});
  add_metrics_options(app, *metrics);
  parse_with(app.add_option("--gpu")
                 ->type_name("SPEC")
                 ->envname("STALLSCOPE_GPU")
                 ->description(std::string("GPU-side capture (CUPTI): all (default), off, light, or a comma\n"
                                           "list of kernel, memcpy, memset, sync, calls. light uses no CUPTI:\n"
                                           "CUDA events at each next() give the GPU time lost waiting for\n"
                                           "data, without kernels or copies (docs/report.md, \"Light GPU\n"
                                           "mode\"). CUPTI serves one tool per process: use off or light to\n"
                                           "profile the GPU with torch.profiler or Nsight under stallscope.\n"
                                           "Also read from STALLSCOPE_GPU.")),
             [gpu](const std::string& v) -> std::string {
               GpuChoice choice;
               std::string bad;
               if (!parse_gpu_choice(v, &choice, &bad)) {
                 return "(or STALLSCOPE_GPU) '" + v + "': unknown item '" + bad + "'; use " + kGpuChoiceHelp;
               }
               *gpu = v;
               return "";
             });
  parse_with(app.add_option("--loader")
                 ->type_name("KIND")
                 ->envname("STALLSCOPE_LOADER")
                 ->description(std::string("which DataLoader the program runs, for A/B runs without editing it:\n"
                                           "torch (default): the script's, as it made it; tuned: torch's with\n"
                                           "workers for the usable cores, persistent_workers, prefetch_factor 4,\n"
                                           "pin_memory and a CUDA-stream prefetch when CUDA is used; reference:\n"
                                           "stallscope.ReferenceLoader where the dataset is one it reads natively\n"
                                           "(else tuned, with one line saying why). Also read from\n"
                                           "STALLSCOPE_LOADER.")),
             [opt](const std::string& v) -> std::string {
               for (const char* kind : vocab::kLoaderKinds) {
                 if (v == kind) {
                   opt->loader = v;
                   return "";
                 }
               }
               return "(or STALLSCOPE_LOADER) '" + v + "': unknown loader; use torch, tuned or reference";
             });
  auto loader_args = std::make_shared<std::optional<analysis::LoaderArgs>>();
  parse_with(
      app.add_option("--loader-args")
          ->type_name("ARGS")
          ->description(std::string("DataLoader arguments every loader of the program runs with instead of\n"
                                    "the script's, as report and tune print them, e.g.\n"
                                    "\"num_workers=2, prefetch_factor=4, persistent_workers=True\"; it\n"
                                    "implies --loader tuned; an argument not given stays as the script has it.\n"
                                    "torch_threads=N (not a DataLoader argument) calls torch.set_num_threads(N)\n"
                                    "at the program's first DataLoader.\n"
                                    "Settings that could change what the script computes are kept, with\n"
                                    "one line saying why (docs/report.md, \"Loader swap\").")),
      [loader_args](const std::string& v) -> std::string {
        std::string why;
        *loader_args = analysis::parse_loader_args(v, &why);
        return loader_args->has_value() ? "" : why;
      });
  // The program and its arguments. Once it starts, every later word is the program's:
  // positionals_at_end() stops option parsing there, as `--` does. (prefix_command() would too,
  // but CLI11 2.1 hands the words after a subcommand's `--` back to the top-level app.)
  app.add_option("PROGRAM", opt->command, "the program to record, and its arguments")->type_name("");
  app.positionals_at_end();
  return [&app, opt, gpu, metrics, loader_args] {
    if (opt->command.empty()) {
      return usage_error(app, "run: no program given; usage: stallscope run [-o FILE] -- PROGRAM [ARGS...]");
    }
    opt->output = with_rank(opt->output);                                             // -o run-{rank}.db under torchrun
    if (int rc = check_output(app, opt->output, opt->overwrite); rc != 0) return rc;  // before the program starts
    std::unique_ptr<MetricsEndpoint> endpoint;                                        // serves until the run ends
    if (metrics->port != 0) {
      // The endpoint reads the recording by name: choose it here, and have an old one (--force)
      // gone before the first scrape could read it.
      if (opt->output.empty()) opt->output = default_output_name(opt->command[0]);
      if (opt->overwrite) (void)Writer::remove(opt->output);
    }
    const std::string path = opt->output;
    if (int rc = start_metrics(
            app, *metrics, [path] { return path; }, own_environment(), &endpoint);
        rc != 0) {
      return rc;
    }
    if (!gpu->empty()) ::setenv("STALLSCOPE_GPU", gpu->c_str(), 1);  // the program's processes read it
    if (loader_args->has_value()) {
      if (opt->loader == vocab::kLoaderReference) {
        return usage_error(app, "run: --loader-args sets torch's DataLoader; it does not go with --loader reference");
      }
      opt->loader = vocab::kLoaderTuned;
      opt->loader_tuned = analysis::loader_args_json(**loader_args, cpus::budget().usable).dump();
    } else if (opt->loader != vocab::kLoaderTorch) {
      // reference falls back to tuned for a dataset it cannot read, so both need the settings.
      opt->loader_tuned = analysis::to_json(analysis::tuned_loader(cpus::budget())).dump();  // one line
    }
    opt->summary = print_summary;
    return run_command(*opt);
  };
}

}  // namespace

const Command kRunCommand = {
    "run",
    "run a program with the collector injected and record a session database",
    "stallscope run [OPTIONS] [--] PROGRAM [ARGS...]",
    "Starts PROGRAM with libstallscope.so preloaded and records every process it starts (forked\n"
    "or spawned) into one SQLite session database, readable while it is written. Signals sent to\n"
    "stallscope are passed to PROGRAM; stallscope exits with PROGRAM's exit status. An -o file\n"
    "that exists is refused before PROGRAM starts (exit status 2) unless --force is given.\n"
    "The options end at `--` or at PROGRAM: the words after it are PROGRAM's.",
    "Examples:\n"
    "  stallscope run -o run.db -- python train.py --epochs 2\n"
    "  stallscope run --gpu off -o run.db -- python train_with_torch_profiler.py\n"
    "  stallscope run --loader reference -o ref.db -- python train.py   # A/B against run.db",
    define,
};

}  // namespace stallscope::cli
