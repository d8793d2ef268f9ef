/* main.c: the `tfc` command-line tool: runs the graph workloads stored in a model file (an
 * SQLite model store): inspect, train, evaluate, predict, draw the graph, plot the metrics.
 * Each command lives in its own file; this one dispatches and prints the overall help. */
#include <stdio.h>
#include <string.h>
#include "config.h"
#include "tool.h"

int cmd_import(int argc, char **argv); /* import.c: `tfc import` (ONNX) */
int cmd_export(int argc, char **argv); /* export.c: `tfc export` (ONNX) */

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *what;
} commands[] = {
    {"info", cmd_info, "summary: nodes by op, parameters, signatures, variables, checkpoints, metrics"},
    {"train", cmd_train, "train through the \"train\" signature, resuming from the latest checkpoint"},
    {"eval", cmd_eval, "loss and metrics of the \"train\" signature over other data"},
    {"run", cmd_run, "inference through the \"predict\" signature (outputs as .npy or printed)"},
    {"dot", cmd_dot, "the graph in Graphviz DOT on stdout"},
    {"plot", cmd_plot, "metric curves (loss, accuracy, ...) as SVG or PNG"},
    {"import", cmd_import, "an ONNX model into a new model store (graph, \"predict\" signature)"},
    {"export", cmd_export, "the \"predict\" signature as an ONNX model (opset 17)"},
};

static void help(FILE *out)
{
    fprintf(out, "usage: tfc COMMAND MODEL.db [OPTIONS]\n"
                 "       tfc COMMAND --help | tfc --help | tfc --version\n\n"
                 "Runs the graph workloads stored in a model file (a tfc-starpu model store).\n\n"
                 "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-6s %s\n", commands[i].name, commands[i].what);
    fprintf(out, "\n%s\n"
                 "Exit status: 0 success, 1 failure, 2 misuse, 130/143 training interrupted by\n"
                 "SIGINT/SIGTERM (after a checkpoint). StarPU's environment variables apply\n"
                 "(STARPU_SCHED, STARPU_NCPU, STARPU_SILENT, ...).\n",
            tool_data_rules);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        help(stderr);
        return TOOL_USAGE;
    }
    const char *c = argv[1];
    if (!strcmp(c, "--help") || !strcmp(c, "-h") || !strcmp(c, "help")) {
        if (argc > 2 && strcmp(c, "help") == 0)
            for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
                if (!strcmp(argv[2], commands[i].name)) {
                    commands[i].fn(2, (char *[]){argv[2], "--help", NULL});
                    return TOOL_OK;
                }
        help(stdout);
        return TOOL_OK;
    }
    if (!strcmp(c, "--version") || !strcmp(c, "-V")) {
        printf("tfc (%s) %s\nmodel store schema version %d\n", PACKAGE_NAME, PACKAGE_VERSION,
               tfc_store_schema_version());
        return TOOL_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(c, commands[i].name)) {
            int rc = commands[i].fn(argc - 1, argv + 1);
            return rc < 0 ? TOOL_OK : rc; /* -1: --help was printed */
        }
    fprintf(stderr, "tfc: unknown command '%s' (commands: info, train, eval, run, dot, plot, import, export; "
                    "see 'tfc --help')\n", c);
    return TOOL_USAGE;
}
