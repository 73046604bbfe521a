// The executable's entry point; everything else in app/cli is also linked into the Python module
// (app/python/), which runs the same command line for `python3 -m onnxforge`.
#include "cli/command.h"

int main(int argc, char** argv) { return onnxforge::cli::run_command_line(argc, argv); }
