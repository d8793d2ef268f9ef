/* fuzz_common.h: what the libFuzzer targets share: the input written to a file (the readers
 * and the store take paths), and the contract every target checks on top of "does not crash":
 * a failure is a known status with a message that names the file, never an internal error or
 * an allocation the input's size does not justify. Leaks are checked by libFuzzer itself
 * (-detect_leaks=1, scripts/fuzz.sh): an input after which more blocks are allocated than
 * freed is run again under LeakSanitizer, and a leak is a finding. */
#ifndef TFC_FUZZ_COMMON_H
#define TFC_FUZZ_COMMON_H

#include <dirent.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../../src/internal.h"

/* A broken contract: prints why and aborts, which libFuzzer reports as a crash and saves the
 * input (the "FUZZ CHECK" line is what scripts/fuzz.sh quotes). */
static void fuzz_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fuzz_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FUZZ CHECK failed: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

static char fuzz_dir_path[64];

/* At exit: the directory and what the last input left in it. */
static void fuzz_dir_remove(void)
{
    DIR *d = opendir(fuzz_dir_path);
    struct dirent *e;
    char p[sizeof fuzz_dir_path + 256];
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", fuzz_dir_path, e->d_name);
            unlink(p);
        }
    if (d) closedir(d);
    rmdir(fuzz_dir_path);
}

/* A directory of this process's own (targets may run as several processes at once), in
 * /dev/shm when there is one: the store targets write the input, and SQLite its -shm file. */
static const char *fuzz_dir(void)
{
    if (!fuzz_dir_path[0]) {
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/tfc-fuzz.XXXXXX",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        if (!mkdtemp(fuzz_dir_path)) fuzz_die("cannot create a directory for the inputs");
        atexit(fuzz_dir_remove);
    }
    return fuzz_dir_path;
}

/* Writes the input to fuzz_dir()/name; returns the path (static storage). */
static const char *fuzz_write_file(const char *name, const uint8_t *data, size_t size)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        fuzz_die("cannot write the input to %s", path);
    return path;
}

/* Removes path and what SQLite may have left next to it. */
static void fuzz_remove_files(const char *path)
{
    static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
    char p[160];
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
        snprintf(p, sizeof p, "%s%s", path, suffixes[i]);
        unlink(p);
    }
}

/* The failure contract: st is a status the library documents, not TFC_ERR_INTERNAL (a broken
 * invariant of the library, not of the input) and not TFC_ERR_OUT_OF_MEMORY (every size is
 * to be checked against the file before anything large is allocated); msg is non-empty and
 * contains must_name (the file's path) when that is not NULL. */
static void fuzz_check_failure(const char *what, tfc_status st, const char *msg,
                               const char *must_name)
{
    if (st == TFC_OK) return;
    if (!strcmp(tfc_status_string(st), "unknown status"))
        fuzz_die("%s: status %d is not a tfc_status (message: %s)", what, (int)st,
                 msg ? msg : "(null)");
    if (st == TFC_ERR_INTERNAL || st == TFC_ERR_OUT_OF_MEMORY)
        fuzz_die("%s: %s on a bad input: %s", what, tfc_status_string(st), msg ? msg : "(null)");
    if (!msg || !msg[0]) fuzz_die("%s: status %s without a message", what, tfc_status_string(st));
    if (must_name && !strstr(msg, must_name))
        fuzz_die("%s: the message does not name '%s': %s", what, must_name, msg);
}

/* Clears the thread's message, so that a failure that sets none is seen. */
static void fuzz_clear_errmsg(void)
{
    tfc_fail_global(TFC_OK, "%s", "");
}

#endif
