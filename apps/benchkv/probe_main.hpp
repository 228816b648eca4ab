// `benchkv probe` and `benchkv calibrate`: commands with arguments of their own
// (docs/your_cluster.md).
//
//   benchkv probe [--transport sim|ucx] [--np 2] [--model FILE] [--scale X] [--seed N] [-o FILE]
//   mpirun -np 2 benchkv probe --transport ucx|mlx5|verbs [--device NAME] [--scale X] [-o FILE]
//   benchkv calibrate --from PROBE.json [--base MODEL.json] -o MODEL.json
#pragma once

namespace bkv::app {

int probe_main(int argc, char** argv);
int calibrate_main(int argc, char** argv);

}  // namespace bkv::app
