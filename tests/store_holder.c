/* store_holder.c: a second process for tests/test_store (started with posix_spawn; it never
 * starts StarPU).
 *   store_holder hold PATH [exclusive]  commits one metric, then holds a write transaction
 *       (or, with exclusive, the exclusive lock) and prints "ready PID" until stdin closes.
 *   store_holder train PATH [exclusive]  opens the store as its training writer
 *       (TFC_STORE_TRAINER: the training lock), prints "ready PID" and keeps it until stdin
 *       closes, then closes the store (exit 0), or prints "error MESSAGE" (exit 1).
 *   store_holder romount DIR  in a private mount namespace, mounts a tmpfs on DIR, fills a
 *       store, remounts it read-only and checks that the store reads and refuses writes
 *       cleanly; a small tmpfs then checks a full disk. Exit 0 on success, 77 when the
 *       sandbox refuses the mounts, 1 on a failed check (printed). */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>
#include "../store/store_testing.h"

static int failures;

#define CHECK(cond, ...)                                          \
    do {                                                          \
        if (!(cond)) {                                            \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);           \
            printf(__VA_ARGS__);                                  \
            printf("\n");                                         \
            failures++;                                           \
        }                                                         \
    } while (0)

static int hold(const char *path, int exclusive)
{
    tfc_store *st;
    unsigned flags = TFC_STORE_CREATE | (exclusive ? TFC_STORE_EXCLUSIVE : 0);
    if (tfc_store_open(path, flags, &st)) {
        printf("error %s\n", tfc_errmsg());
        return 1;
    }
    if (tfc_store_log_metric(st, 1, "holder", 1.0) || tfc_store_flush(st)) {
        printf("error %s\n", tfc_store_errmsg(st));
        return 1;
    }
    /* an open write transaction with a row that is never committed */
    if (tfc_store_exec_sql(st, "BEGIN IMMEDIATE; INSERT INTO metrics(step, name, value, time) "
                               "VALUES (2, 'holder', 2.0, 0)")) {
        printf("error %s\n", tfc_store_errmsg(st));
        return 1;
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char buf[64];
    while (fread(buf, 1, sizeof buf, stdin) > 0) {}
    tfc_store_exec_sql(st, "ROLLBACK");
    tfc_store_close(st);
    return 0;
}

static int train(const char *path, int exclusive)
{
    tfc_store *st;
    unsigned flags = TFC_STORE_CREATE | TFC_STORE_TRAINER | (exclusive ? TFC_STORE_EXCLUSIVE : 0);
    if (tfc_store_open(path, flags, &st)) {
        printf("error %s\n", tfc_errmsg());
        return 1;
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char buf[64];
    while (fread(buf, 1, sizeof buf, stdin) > 0) {}
    tfc_store_close(st);
    return 0;
}

static int skip(const char *what)
{
    printf("skip: %s: %s\n", what, strerror(errno));
    return 77;
}

static void fill(tfc_store *st, int n)
{
    for (int i = 0; i < n; i++) tfc_store_log_metric(st, i, "loss", 1.0 / (i + 1));
}

static int romount(const char *dir)
{
    char path[4096];
    tfc_store *st = NULL;
    if (unshare(CLONE_NEWNS)) return skip("unshare(CLONE_NEWNS)");
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) return skip("private mounts");
    if (mount("tmpfs", dir, "tmpfs", 0, "size=8m")) return skip("mount tmpfs");
    snprintf(path, sizeof path, "%s/model.db", dir);

    CHECK(!tfc_store_open(path, TFC_STORE_CREATE, &st), "create: %s", tfc_errmsg());
    const char *feeds[] = {"x"};
    tfc_signature sig = {1, feeds, 0, NULL, 0, NULL, "loss", NULL};
    CHECK(!tfc_store_set_signature(st, "predict", &sig), "%s", tfc_store_errmsg(st));
    fill(st, 100);
    CHECK(!tfc_store_flush(st), "%s", tfc_store_errmsg(st));
    tfc_store_close(st);
    st = NULL;
    if (mount(NULL, dir, NULL, MS_REMOUNT | MS_RDONLY, NULL)) return skip("remount read-only");

    /* read-write on a read-only mount: a clean error that says so */
    tfc_status s = tfc_store_open(path, 0, &st);
    CHECK(s == TFC_ERR_STORE && !st, "read-write open on a read-only mount gave %d", s);
    CHECK(strstr(tfc_errmsg(), "read-only") && strstr(tfc_errmsg(), path), "message: %s",
          tfc_errmsg());
    printf("read-write open: %s\n", tfc_errmsg());
    tfc_store_close(st);
    st = NULL;

    /* read-only: everything reads, writes fail cleanly */
    CHECK(!tfc_store_open(path, TFC_STORE_READONLY, &st), "read-only open: %s", tfc_errmsg());
    if (st) {
        int n = 0;
        int64_t *steps = NULL;
        double *values = NULL;
        CHECK(!tfc_store_read_metric(st, "loss", &n, &steps, &values) && n == 100,
              "read_metric: %d values: %s", n, tfc_store_errmsg(st));
        free(steps);
        free(values);
        tfc_signature *got = NULL;
        CHECK(!tfc_store_get_signature(st, "predict", &got) && got && got->n_feeds == 1,
              "get_signature: %s", tfc_store_errmsg(st));
        tfc_signature_free(got);
        s = tfc_store_log_metric(st, 0, "loss", 1.0);
        CHECK(s == TFC_ERR_STORE && strstr(tfc_store_errmsg(st), "read-only"), "log_metric: %s",
              tfc_store_errmsg(st));
        s = tfc_store_set_signature(st, "train", &sig);
        CHECK(s == TFC_ERR_STORE, "set_signature on a read-only store gave %d", s);
        tfc_store_close(st);
    }
    umount(dir);

    /* a full disk: a 256 KiB tmpfs */
    if (mount("tmpfs", dir, "tmpfs", 0, "size=256k")) return skip("mount a small tmpfs");
    CHECK(!tfc_store_open(path, TFC_STORE_CREATE, &st), "create: %s", tfc_errmsg());
    if (st) {
        fill(st, 100);
        CHECK(!tfc_store_flush(st), "first metrics: %s", tfc_store_errmsg(st));
        fill(st, 40000);
        s = tfc_store_flush(st);
        CHECK(s == TFC_ERR_STORE && strstr(tfc_store_errmsg(st), "disk full"),
              "full disk gave %d: %s", s, tfc_store_errmsg(st));
        printf("full disk: %s\n", tfc_store_errmsg(st));
        int n = 0;
        int64_t *steps = NULL;
        double *values = NULL;
        CHECK(!tfc_store_read_metric(st, "loss", &n, &steps, &values) && n >= 100,
              "metrics after a full disk: %d: %s", n, tfc_store_errmsg(st));
        free(steps);
        free(values);
        tfc_store_close(st);
    }
    umount(dir);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "hold"))
        return hold(argv[2], argc > 3 && !strcmp(argv[3], "exclusive"));
    if (argc >= 3 && !strcmp(argv[1], "train"))
        return train(argv[2], argc > 3 && !strcmp(argv[3], "exclusive"));
    if (argc == 3 && !strcmp(argv[1], "romount")) return romount(argv[2]);
    fprintf(stderr, "usage: %s hold|train PATH [exclusive] | romount DIR\n", argv[0]);
    return 2;
}
