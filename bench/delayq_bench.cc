// delayq-bench: load generator and micro-benchmarks. Each subcommand prints
// one JSON object on stdout, so scripts in bench/ can collect figures into
// docs/benchmarks.md.
//
//   delayq-bench engine --jobs N --body 100   the engine alone, in process
#include <cstdio>

#include "CLI/CLI.hpp"
#include "engine_bench.h"

int main(int argc, char** argv) {
  CLI::App app{"delayq-bench: load generator and benchmarks for delayq"};
  app.require_subcommand(1);

  delayq::bench::EngineBenchOptions engine_opts;
  CLI::App* engine = app.add_subcommand("engine", "the engine alone, in process, no I/O");
  engine->add_option("--jobs", engine_opts.jobs, "pending jobs for the memory and add-rate runs")
      ->capture_default_str();
  engine->add_option("--body", engine_opts.body_bytes, "body bytes per job")->capture_default_str();
  engine
      ->add_option("--id-bytes", engine_opts.id_bytes, "client-chosen id length; 0 = generated ids")
      ->capture_default_str();
  engine->add_option("--cycles", engine_opts.cycles, "add->reserve->finish lifecycles to time")
      ->capture_default_str();
  engine->add_option("--adds", engine_opts.adds, "adds timed for the add rates (0 = min(jobs, 1M))")
      ->capture_default_str();
  engine->add_option("--seed", engine_opts.seed, "random seed")->capture_default_str();
  engine->add_option("--rounds", engine_opts.rounds, "rounds per figure (medians are reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));

  CLI11_PARSE(app, argc, argv);
  if (engine->parsed()) return delayq::bench::RunEngineBench(engine_opts);
  return 2;
}
