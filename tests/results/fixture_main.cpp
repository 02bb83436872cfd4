// results_fixture OUT_DIR: writes a synthetic set of runs (a weight-decay
// sweep with two seeds per point, a K-bias run with Sink_*, a run still
// going, a diverged one, an unnormalized one whose Sink values are proxy
// scores) for the browser, TensorBoard and table-format tests. Known numbers,
// no training, no LibTorch.
#include <cmath>
#include <cstdio>
#include <exception>

#include "synthetic_runs.h"

using namespace sink::testing;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: results_fixture OUT_DIR\n");
    return 2;
  }
  try {
    const std::string out = argv[1];
    auto sweep =
        compile_plans("sweep weight_decay over micro { optim.weight_decay in [0.0, 0.1, 1.0]  train.seeds = 2 }\n");
    for (const auto& p : sweep) {
      const double wd = p.number("optim.weight_decay");
      const double seed = static_cast<double>(p.integer("train.seed"));
      EvalLine e;
      e.valid_loss = 2.3 + 0.2 * wd + 0.02 * seed;
      e.train_loss = e.valid_loss + 0.04;
      e.sink = {{1, 70 - 40 * wd + 3 * seed}};
      // micro: 2 layers x 2 heads; the first layer attends to token 1 more with less weight decay.
      e.alpha = {{0.8 - 0.3 * wd, 0.2}, {0.5, 0.1 + 0.2 * wd}};
      e.massive = {2.0, 30.0 - 20.0 * wd};
      write_run(out, {p, "completed", "", curve(6, e)});
    }
    auto others = compile_plans(R"(
      experiment k_bias extends micro { model.biases = k }
      experiment still_going extends micro {}
      experiment too_hot extends micro { optim.lr = 10.0 }
      experiment sigmoid_none extends micro { attention { score = sigmoid(qk)  normalize = none } }
    )");
    EvalLine star;
    star.sink = {{1, 5}};
    star.sink_star = 85;
    star.alpha = {{0.05, 0.1}, {0.02, 0.3}};
    star.alpha_star = {{0.9, 0.7}, {0.95, 0.4}};
    star.massive = {1.2, 1.5};
    write_run(out, {plan_named(others, "k_bias"), "completed", "", curve(6, star)});
    EvalLine partial;
    partial.alpha = {{0.3, 0.6}, {0.4, 0.2}};
    partial.massive = {1.0, 4.0};
    write_run(out, {plan_named(others, "still_going"), "running", "", curve(3, partial)});
    write_run(out, {plan_named(others, "too_hot"), "diverged", "non-finite loss at step 4", {}});
    // Unnormalized attention: its Sink values come from the paper's proxy scores, as the runtime records.
    EvalLine proxy;
    proxy.sink = {{1, 18.5}};
    proxy.alpha = {{0.2, 0.25}, {0.15, 0.3}};
    proxy.massive = {1.0, 2.0};
    proxy.sink_from_proxy = true;
    write_run(out, {plan_named(others, "sigmoid_none"), "completed", "", curve(6, proxy)});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "results_fixture: %s\n", e.what());
    return 1;
  }
  return 0;
}
