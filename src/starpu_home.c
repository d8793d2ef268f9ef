/* starpu_home.c: StarPU 1.3 aborts the process when it cannot create its sampling directory
 * ($home/.starpu/sampling, or $STARPU_PERF_MODEL_DIR) at starpu_init, as on a compute node
 * whose home is mounted read-only. So the directory is tried first: an unusable home gives
 * way to a private temporary one (with one warning), removed when StarPU stops; an unusable
 * STARPU_PERF_MODEL_DIR, which the user chose for the models, is an error. */
#define _GNU_SOURCE /* nftw's FTW_DEPTH, FTW_PHYS */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "starpu_home.h"

/* StarPU 1.3.10 keeps its model paths in buffers of this many bytes (perfmodel.c,
 * _PERF_MODEL_DIR_MAXLEN) and appends this to the sampling directory: a longer path is
 * silently cut, and StarPU then writes somewhere else or aborts. */
#define STARPU_DIR_MAXLEN 256
#define STARPU_CODELETS_SUBDIR "/codelets/45/"

struct tfc_starpu_home {
    char *dir;      /* the private directory */
    char *old_home; /* STARPU_HOME before (NULL: unset) */
    char *old_xdg;  /* XDG_CACHE_HOME before, when it had to be replaced too */
};

/* The home StarPU 1.3.10 takes (_starpu_get_home_path: a variable counts when set, even
 * empty), and the name of the variable it comes from. */
static const char *starpu_home(const char **from)
{
    static const char *const vars[] = {"XDG_CACHE_HOME", "STARPU_HOME", "HOME", "TMPDIR",
                                       "TEMP", "TMP"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v) {
            *from = vars[i];
            return v;
        }
    }
    *from = "StarPU's default";
    return "/tmp";
}

/* mkdir -p with StarPU's mode: 0, or the errno of the step that failed. */
static int make_dirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return ENAMETOOLONG;
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p) continue;
        char c = *p;
        *p = 0;
        if (mkdir(buf, S_IRWXU) && errno != EEXIST) return errno;
        *p = c;
        if (!c) break;
    }
    struct stat sb;
    if (stat(buf, &sb)) return errno;
    return S_ISDIR(sb.st_mode) ? 0 : ENOTDIR;
}

/* 0 when StarPU can use dir (with its trailing '/', as StarPU composes it) as its sampling
 * directory: short enough for its buffers, created, and a new file can be made in it
 * (access() is not enough: ACLs, NFS, root). */
static int sampling_usable(const char *dir)
{
    if (strlen(dir) + sizeof STARPU_CODELETS_SUBDIR > STARPU_DIR_MAXLEN) return ENAMETOOLONG;
    int err = make_dirs(dir);
    if (err) return err;
    char probe[PATH_MAX];
    if (snprintf(probe, sizeof probe, "%s/.tfc-probe-XXXXXX", dir) >= (int)sizeof probe)
        return ENAMETOOLONG;
    int fd = mkstemp(probe);
    if (fd < 0) return errno;
    close(fd);
    unlink(probe);
    return 0;
}

static int sampling_under(const char *home)
{
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s/.starpu/sampling/", home) >= (int)sizeof dir)
        return ENAMETOOLONG;
    return sampling_usable(dir);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void restore(const char *name, const char *old)
{
    if (old)
        setenv(name, old, 1);
    else
        unsetenv(name);
}

/* A new private directory that StarPU can use, under $TMPDIR or else /tmp; NULL when none. */
static char *make_private(int *err)
{
    const char *bases[] = {getenv("TMPDIR"), "/tmp"};
    for (int i = 0; i < 2; i++) {
        if (!bases[i] || !*bases[i]) continue;
        char tmpl[PATH_MAX];
        snprintf(tmpl, sizeof tmpl, "%s/tfc-starpu-home-XXXXXX", bases[i]);
        if (!mkdtemp(tmpl)) {
            *err = errno;
            continue;
        }
        *err = sampling_under(tmpl);
        if (!*err) return strdup(tmpl);
        nftw(tmpl, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    }
    return NULL;
}

static tfc_status fall_back(const char *home, const char *from, int why,
                            struct tfc_starpu_home **out, char *msg)
{
    int err = 0;
    struct tfc_starpu_home *h = calloc(1, sizeof *h);
    if (h) h->dir = make_private(&err);
    if (!h || !h->dir) {
        free(h);
        return tfc_fail(msg, TFC_ERR_RUNTIME, "StarPU cannot write its performance models under "
                        "'%.200s' (from %s): %s; and no private directory could be made in $TMPDIR "
                        "or /tmp: %s", home, from, strerror(why), strerror(err ? err : ENOMEM));
    }
    const char *old = getenv("STARPU_HOME");
    h->old_home = old ? strdup(old) : NULL;
    if (!strcmp(from, "XDG_CACHE_HOME")) /* StarPU reads it before STARPU_HOME */
        h->old_xdg = strdup(home);
    fprintf(stderr, "tfc: warning: StarPU cannot write its performance models under '%s' "
            "(from %s): %s; this process uses the private directory %s instead (STARPU_HOME%s "
            "set to it), removed when StarPU stops\n", home, from, strerror(why), h->dir,
            h->old_xdg ? " and XDG_CACHE_HOME" : "");
    setenv("STARPU_HOME", h->dir, 1);
    if (h->old_xdg) setenv("XDG_CACHE_HOME", h->dir, 1);
    *out = h;
    return TFC_OK;
}

tfc_status tfc_starpu_home_prepare(struct tfc_starpu_home **out, char *msg)
{
    *out = NULL;
    const char *models = getenv("STARPU_PERF_MODEL_DIR");
    if (models) {
        char dir[PATH_MAX]; /* as StarPU writes it */
        int too_long = snprintf(dir, sizeof dir, "%s/", models) >= (int)sizeof dir;
        int err = too_long ? ENAMETOOLONG : sampling_usable(dir);
        if (err)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "STARPU_PERF_MODEL_DIR '%.200s' "
                            "cannot hold StarPU's performance models: %s (set it to a writable "
                            "directory of at most %d characters, or unset it)", models,
                            strerror(err),
                            (int)(STARPU_DIR_MAXLEN - sizeof STARPU_CODELETS_SUBDIR - 1));
        return TFC_OK;
    }
    const char *from, *home = starpu_home(&from);
    int err = sampling_under(home);
    return err ? fall_back(home, from, err, out, msg) : TFC_OK;
}

const char *tfc_starpu_home_path(const struct tfc_starpu_home *h)
{
    return h ? h->dir : NULL;
}

void tfc_starpu_home_release(struct tfc_starpu_home *h)
{
    if (!h) return;
    restore("STARPU_HOME", h->old_home);
    if (h->old_xdg) restore("XDG_CACHE_HOME", h->old_xdg);
    nftw(h->dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    tfc_starpu_home_abandon(h);
}

void tfc_starpu_home_abandon(struct tfc_starpu_home *h)
{
    if (!h) return;
    free(h->dir);
    free(h->old_home);
    free(h->old_xdg);
    free(h);
}
