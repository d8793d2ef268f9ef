/* plot.c: `tfc plot`: the store's metric curves (loss, accuracy, ...) against the step, one
 * panel per metric, as an SVG file with tick labels, or as a PNG rasterized here (polylines,
 * axes, ticks and labels in a 3x5 pixel font) and encoded with zlib's deflate and crc32. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>
#include "tool.h"

static const char plot_usage[] =
    "usage: tfc plot MODEL.db -o FILE.svg|FILE.png [--metric NAME ...]\n\n"
    "Draws the metrics logged in the model store (by `tfc train`: the \"train\" signature's loss\n"
    "and metrics at every step) against the step, one panel per metric: by default every\n"
    "metric recorded in the store, in the order first logged (at most 64), or the ones named\n"
    "by --metric. A gap in a series (steps missing over more than twice its usual spacing)\n"
    "is left as a gap in its line. FILE ending in .png gives a PNG image, anything else SVG.\n";

/* ---- Layout ------------------------------------------------------------------------- */

enum { W = 800, PANEL_H = 260, ML = 78, MR = 24, MT = 34, MB = 40 };

static const unsigned char palette[][3] = {
    {31, 119, 180}, {214, 39, 40}, {44, 160, 44}, {255, 127, 14}, {148, 103, 189},
    {140, 86, 75},  {227, 119, 194}, {127, 127, 127},
};

struct axis {
    double lo, hi, step; /* range and tick spacing */
    int n_ticks;
    double ticks[16];
    int decimals;
};

/* "Nice" ticks (1, 2, 5 times a power of ten) covering [lo, hi]. */
static void nice_axis(double lo, double hi, struct axis *a)
{
    if (!(hi > lo)) {
        double pad = fabs(lo) > 0 ? fabs(lo) * 0.1 : 0.5;
        lo -= pad;
        hi += pad;
    }
    double raw = (hi - lo) / 5, mag = pow(10, floor(log10(raw))), f = raw / mag;
    double step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
    a->lo = floor(lo / step) * step;
    a->hi = ceil(hi / step) * step;
    a->step = step;
    a->n_ticks = 0;
    for (double t = a->lo; t <= a->hi + step * 0.5 && a->n_ticks < 16; t += step)
        a->ticks[a->n_ticks++] = fabs(t) < step * 1e-9 ? 0 : t;
    a->decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (a->decimals > 10) a->decimals = 10;
}

static void tick_label(const struct axis *a, double v, char *buf, size_t len)
{
    if (fabs(v) >= 1e6 || (fabs(v) > 0 && fabs(v) < 1e-4)) snprintf(buf, len, "%.3g", v);
    else snprintf(buf, len, "%.*f", a->decimals, v);
}

/* A series' points in panel pixels, decimated to a min and a max per pixel column when it
 * has many more points than columns. Non-finite values and gaps in the steps break the line
 * (pen up). */
struct pt {
    double x, y;
    int pen_up;
};

struct panel {
    const struct tool_series *s;
    double *smooth;     /* a moving average of s->values when the series is long, else NULL */
    struct axis ax, ay;
    double gap_over;    /* a step difference above this is a gap (0: none) */
    int top;      /* y of the panel's top */
    int x0, y0, x1, y1; /* plot area */
};

static double px(const struct panel *p, double step)
{
    return p->x0 + (step - p->ax.lo) / (p->ax.hi - p->ax.lo) * (p->x1 - p->x0);
}

static double py(const struct panel *p, double v)
{
    return p->y1 - (v - p->ay.lo) / (p->ay.hi - p->ay.lo) * (p->y1 - p->y0);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Steps as doubles: int64 differences could overflow. */
static double step_diff(const struct tool_series *s, int i)
{
    return (double)s->steps[i] - (double)s->steps[i - 1];
}

/* Twice the series' usual spacing (the median step difference): a larger difference is a gap,
 * steps missing rather than logged sparsely; drawn across, it would read as a plateau. 0 when
 * the series has too few distinct steps to say. */
static double gap_threshold(const struct tool_series *s)
{
    double *d = s->n > 2 ? malloc(sizeof *d * (size_t)s->n) : NULL;
    int n = 0;
    for (int i = 1; d && i < s->n; i++)
        if (step_diff(s, i) > 0) d[n++] = step_diff(s, i);
    double over = 0;
    if (n >= 2) {
        qsort(d, (size_t)n, sizeof *d, by_value);
        over = 2 * d[n / 2];
    }
    free(d);
    return over;
}

/* Whether a gap lies between the series' points i - 1 and i. */
static int gap_before(const struct panel *p, int i)
{
    return i > 0 && p->gap_over > 0 && step_diff(p->s, i) > p->gap_over;
}

/* A panel for s, its x axis covering [xlo, xhi] (shared by the panels). Long noisy series
 * (per-step losses) also get a trailing moving average over about 2% of their points, drawn
 * over the raw values in a paler colour. */
static void layout(const struct tool_series *s, double xlo, double xhi, int top, struct panel *p)
{
    double ylo = INFINITY, yhi = -INFINITY;
    for (int i = 0; i < s->n; i++) {
        if (!isfinite(s->values[i])) continue;
        ylo = fmin(ylo, s->values[i]);
        yhi = fmax(yhi, s->values[i]);
    }
    if (!isfinite(ylo)) ylo = 0, yhi = 1;
    p->s = s;
    p->smooth = NULL;
    p->gap_over = gap_threshold(s);
    int window = s->n / 50;
    if (window >= 3 && (p->smooth = malloc(sizeof *p->smooth * (size_t)s->n))) {
        double sum = 0;
        int count = 0, start = 0; /* the average starts again after a gap */
        for (int i = 0; i < s->n; i++) {
            if (gap_before(p, i)) sum = 0, count = 0, start = i;
            if (isfinite(s->values[i])) sum += s->values[i], count++;
            if (i - window >= start && isfinite(s->values[i - window]))
                sum -= s->values[i - window], count--;
            p->smooth[i] = count ? sum / count : NAN;
        }
    }
    nice_axis(xlo, xhi, &p->ax);
    nice_axis(ylo, yhi, &p->ay);
    p->top = top;
    p->x0 = ML;
    p->x1 = W - MR;
    p->y0 = top + MT;
    p->y1 = top + PANEL_H - MB;
}

/* The points of values (p's series or its moving average) to draw (caller frees). */
static struct pt *points(const struct panel *p, const double *values, int *n_out)
{
    const struct tool_series *s = p->s;
    int cols = p->x1 - p->x0 + 1;
    struct pt *out = malloc(sizeof *out * (size_t)(s->n > 2 * cols ? 2 * cols + 2 : s->n + 1));
    int n = 0, pen_up = 1;
    if (!out) return *n_out = 0, NULL;
    if (s->n <= 2 * cols) {
        for (int i = 0; i < s->n; i++) {
            if (gap_before(p, i)) pen_up = 1;
            if (!isfinite(values[i])) {
                pen_up = 1;
                continue;
            }
            out[n++] = (struct pt){px(p, (double)s->steps[i]), py(p, values[i]), pen_up};
            pen_up = 0;
        }
    } else {
        int i = 0;
        while (i < s->n) {
            int col = (int)(px(p, (double)s->steps[i]) - p->x0);
            double mn = INFINITY, mx = -INFINITY;
            int imn = -1, imx = -1, gap = 0;
            /* a gap inside a column breaks the line at the column: the same pixel */
            for (; i < s->n && (int)(px(p, (double)s->steps[i]) - p->x0) == col; i++) {
                gap |= gap_before(p, i);
                double v = values[i];
                if (!isfinite(v)) {
                    gap = 1;
                    continue;
                }
                if (v < mn) mn = v, imn = i;
                if (v > mx) mx = v, imx = i;
            }
            if (gap) pen_up = 1;
            if (imn < 0) continue;
            double x = p->x0 + col;
            if (imn <= imx) {
                out[n++] = (struct pt){x, py(p, mn), pen_up};
                if (imx != imn) out[n++] = (struct pt){x, py(p, mx), 0};
            } else {
                out[n++] = (struct pt){x, py(p, mx), pen_up};
                out[n++] = (struct pt){x, py(p, mn), 0};
            }
            pen_up = 0;
        }
    }
    *n_out = n;
    return out;
}

/* ---- SVG ---------------------------------------------------------------------------- */

static void svg_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

static int write_svg(FILE *f, int n, const struct panel *panels)
{
    int h = n * PANEL_H;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"Helvetica, Arial, sans-serif\" "
               "font-size=\"11\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, h, W, h);
    for (int k = 0; k < n; k++) {
        const struct panel *p = &panels[k];
        const unsigned char *c = palette[k % (sizeof palette / sizeof palette[0])];
        char buf[64];
        fprintf(f, "<g class=\"panel\">\n<text x=\"%d\" y=\"%d\" font-size=\"14\" "
                   "font-weight=\"bold\">", p->x0, p->top + 20);
        svg_text(f, p->s->name);
        fprintf(f, "</text>\n");
        /* grid, ticks and labels */
        for (int i = 0; i < p->ay.n_ticks; i++) {
            double y = py(p, p->ay.ticks[i]);
            tick_label(&p->ay, p->ay.ticks[i], buf, sizeof buf);
            fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>"
                       "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"black\"/>"
                       "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                    p->x0, y, p->x1, y, p->x0 - 5, y, p->x0, y, p->x0 - 8, y + 4, buf);
        }
        for (int i = 0; i < p->ax.n_ticks; i++) {
            double x = px(p, p->ax.ticks[i]);
            tick_label(&p->ax, p->ax.ticks[i], buf, sizeof buf);
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e5e5e5\"/>"
                       "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\"/>"
                       "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                    x, p->y0, x, p->y1, x, p->y1, x, p->y1 + 5, x, p->y1 + 17, buf);
        }
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
                   "stroke=\"black\"/>\n", p->x0, p->y0, p->x1 - p->x0, p->y1 - p->y0);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">step</text>\n",
                (p->x0 + p->x1) / 2, p->y1 + 32);
        for (int pass = 0; pass < (p->smooth ? 2 : 1); pass++) {
            int np, pale = p->smooth && pass == 0;
            struct pt *pts = points(p, pass ? p->smooth : p->s->values, &np);
            fprintf(f, "<path fill=\"none\" stroke=\"rgb(%d,%d,%d)\" stroke-width=\"%s\" "
                       "stroke-opacity=\"%s\" stroke-linejoin=\"round\" d=\"", c[0], c[1], c[2],
                    pale ? "1" : "1.5", pale ? "0.35" : "1");
            for (int i = 0; i < np; i++)
                fprintf(f, "%s%.1f %.1f", pts[i].pen_up ? (i ? " M" : "M") : " L", pts[i].x,
                        pts[i].y);
            fprintf(f, "\"/>\n");
            for (int i = 0; i < np; i++) /* isolated points */
                if (pts[i].pen_up && (i + 1 == np || pts[i + 1].pen_up))
                    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"rgb(%d,%d,%d)\"/>\n",
                            pts[i].x, pts[i].y, c[0], c[1], c[2]);
            free(pts);
        }
        fprintf(f, "</g>\n");
    }
    fprintf(f, "</svg>\n");
    return 0;
}

/* ---- PNG ---------------------------------------------------------------------------- */

struct canvas {
    int w, h;
    unsigned char *rgb;
};

static void put(struct canvas *c, int x, int y, const unsigned char *col)
{
    if (x < 0 || y < 0 || x >= c->w || y >= c->h) return;
    memcpy(c->rgb + ((size_t)y * (size_t)c->w + (size_t)x) * 3, col, 3);
}

/* A line of the given width (1 or 2 pixels), Bresenham. */
static void line(struct canvas *c, double fx0, double fy0, double fx1, double fy1,
                 const unsigned char *col, int width)
{
    int x0 = (int)lround(fx0), y0 = (int)lround(fy0), x1 = (int)lround(fx1), y1 = (int)lround(fy1);
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (;;) {
        put(c, x0, y0, col);
        if (width > 1) {
            put(c, x0 + 1, y0, col);
            put(c, x0, y0 + 1, col);
        }
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * err;
        if (e2 >= dy) err += dy, x0 += sx;
        if (e2 <= dx) err += dx, y0 += sy;
    }
}

/* A 3x5 font: five rows of three bits (4 left, 1 right) per glyph. */
static const char font_chars[] = "0123456789.-+abcdefghijklmnopqrstuvwxyz_/:";
static const char font_rows[][6] = {
    "75557", "26227", "71747", "71717", "55711", "74717", "74757", "71111", "75757", "75717",
    "00002", "00700", "02720",
    "25755", "65656", "74447", "65556", "74647", "74644", "74557", "55755", "72227", "11157",
    "55655", "44447", "57755", "65555", "25552", "65644", "25563", "65655", "34216", "72222",
    "55557", "55552", "55775", "55255", "55222", "71247",
    "00007", "11244", "02020",
};

/* Draws s with its top-left corner at (x, y), 2 pixels per font pixel; returns the width. */
static int text(struct canvas *c, int x, int y, const char *s, const unsigned char *col, int draw)
{
    int cx = x;
    for (; *s; s++) {
        char ch = *s >= 'A' && *s <= 'Z' ? (char)(*s - 'A' + 'a') : *s;
        const char *hit = strchr(font_chars, ch);
        if (hit && ch && draw) {
            const char *rows = font_rows[hit - font_chars];
            for (int r = 0; r < 5; r++)
                for (int b = 0; b < 3; b++)
                    if ((rows[r] - '0') & (4 >> b))
                        for (int dy = 0; dy < 2; dy++)
                            for (int dx = 0; dx < 2; dx++) put(c, cx + b * 2 + dx, y + r * 2 + dy, col);
        }
        cx += 8;
    }
    return cx - x - (cx > x ? 2 : 0);
}

static void chunk(FILE *f, const char *type, const unsigned char *data, uint32_t len)
{
    unsigned char hdr[8] = {(unsigned char)(len >> 24), (unsigned char)(len >> 16),
                            (unsigned char)(len >> 8), (unsigned char)len};
    memcpy(hdr + 4, type, 4);
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, hdr + 4, 4);
    if (len) crc = crc32(crc, data, len);
    unsigned char tail[4] = {(unsigned char)(crc >> 24), (unsigned char)(crc >> 16),
                             (unsigned char)(crc >> 8), (unsigned char)crc};
    fwrite(hdr, 1, 8, f);
    if (len) fwrite(data, 1, len, f);
    fwrite(tail, 1, 4, f);
}

static int write_png(FILE *f, int n, const struct panel *panels)
{
    static const unsigned char black[3] = {0, 0, 0}, grid[3] = {229, 229, 229},
                               grey[3] = {90, 90, 90};
    struct canvas c = {W, n * PANEL_H, NULL};
    c.rgb = malloc((size_t)c.w * (size_t)c.h * 3);
    if (!c.rgb) return -1;
    memset(c.rgb, 255, (size_t)c.w * (size_t)c.h * 3);
    for (int k = 0; k < n; k++) {
        const struct panel *p = &panels[k];
        const unsigned char *col = palette[k % (sizeof palette / sizeof palette[0])];
        char buf[64];
        text(&c, p->x0, p->top + 10, p->s->name, black, 1);
        for (int i = 0; i < p->ay.n_ticks; i++) {
            double y = py(p, p->ay.ticks[i]);
            line(&c, p->x0, y, p->x1, y, grid, 1);
            line(&c, p->x0 - 5, y, p->x0, y, black, 1);
            tick_label(&p->ay, p->ay.ticks[i], buf, sizeof buf);
            int w = text(&c, 0, 0, buf, black, 0);
            text(&c, p->x0 - 8 - w, (int)y - 5, buf, grey, 1);
        }
        for (int i = 0; i < p->ax.n_ticks; i++) {
            double x = px(p, p->ax.ticks[i]);
            line(&c, x, p->y0, x, p->y1, grid, 1);
            line(&c, x, p->y1, x, p->y1 + 5, black, 1);
            tick_label(&p->ax, p->ax.ticks[i], buf, sizeof buf);
            int w = text(&c, 0, 0, buf, black, 0);
            text(&c, (int)x - w / 2, p->y1 + 9, buf, grey, 1);
        }
        line(&c, p->x0, p->y0, p->x1, p->y0, black, 1);
        line(&c, p->x0, p->y1, p->x1, p->y1, black, 1);
        line(&c, p->x0, p->y0, p->x0, p->y1, black, 1);
        line(&c, p->x1, p->y0, p->x1, p->y1, black, 1);
        unsigned char pale[3];
        for (int i = 0; i < 3; i++) pale[i] = (unsigned char)(255 - (255 - col[i]) * 35 / 100);
        for (int pass = 0; pass < (p->smooth ? 2 : 1); pass++) {
            int np, faint = p->smooth && pass == 0;
            struct pt *pts = points(p, pass ? p->smooth : p->s->values, &np);
            for (int i = 0; i < np; i++) {
                if (!pts[i].pen_up)
                    line(&c, pts[i - 1].x, pts[i - 1].y, pts[i].x, pts[i].y, faint ? pale : col,
                         faint ? 1 : 2);
                else if (i + 1 == np || pts[i + 1].pen_up) /* an isolated point: a dot */
                    for (int dy = -2; dy <= 2; dy++)
                        line(&c, pts[i].x - 2, pts[i].y + dy, pts[i].x + 2, pts[i].y + dy, col, 1);
            }
            free(pts);
        }
    }
    /* scanlines, each led by filter type 0, deflated */
    size_t stride = (size_t)c.w * 3 + 1, raw_len = stride * (size_t)c.h;
    unsigned char *raw = malloc(raw_len);
    uLongf zlen = compressBound((uLong)raw_len);
    unsigned char *z = malloc(zlen);
    int rc = -1;
    if (raw && z) {
        for (int y = 0; y < c.h; y++) {
            raw[(size_t)y * stride] = 0;
            memcpy(raw + (size_t)y * stride + 1, c.rgb + (size_t)y * (size_t)c.w * 3, stride - 1);
        }
        if (compress2(z, &zlen, raw, (uLong)raw_len, 6) == Z_OK) {
            static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
            unsigned char ihdr[13] = {(unsigned char)(c.w >> 24), (unsigned char)(c.w >> 16),
                                      (unsigned char)(c.w >> 8), (unsigned char)c.w,
                                      (unsigned char)(c.h >> 24), (unsigned char)(c.h >> 16),
                                      (unsigned char)(c.h >> 8), (unsigned char)c.h,
                                      8, 2, 0, 0, 0}; /* 8-bit RGB, deflate, no interlace */
            fwrite(sig, 1, 8, f);
            chunk(f, "IHDR", ihdr, 13);
            chunk(f, "IDAT", z, (uint32_t)zlen);
            chunk(f, "IEND", NULL, 0);
            rc = 0;
        }
    }
    free(raw);
    free(z);
    free(c.rgb);
    return rc;
}

int tool_plot_write(const char *cmd, const char *path, int n, const struct tool_series *series)
{
    struct panel *panels = calloc((size_t)n + 1, sizeof *panels);
    if (!panels) return tool_error(cmd, "out of memory");
    double xlo = INFINITY, xhi = -INFINITY;
    for (int k = 0; k < n; k++)
        for (int i = 0; i < series[k].n; i++) {
            xlo = fmin(xlo, (double)series[k].steps[i]);
            xhi = fmax(xhi, (double)series[k].steps[i]);
        }
    if (!isfinite(xlo)) xlo = 0, xhi = 1;
    for (int k = 0; k < n; k++) layout(&series[k], xlo, xhi, k * PANEL_H, &panels[k]);
    size_t len = strlen(path);
    int png = len > 4 && !strcasecmp(path + len - 4, ".png");
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(panels);
        return tool_error(cmd, "%s: %s", path, strerror(errno));
    }
    int bad = png ? write_png(f, n, panels) : write_svg(f, n, panels);
    bad |= ferror(f);
    bad |= fclose(f) != 0;
    for (int k = 0; k < n; k++) free(panels[k].smooth);
    free(panels);
    if (bad) {
        remove(path);
        return tool_error(cmd, "%s: cannot write the image", path);
    }
    return TOOL_OK;
}

int cmd_plot(int argc, char **argv)
{
    struct tool_opts o;
    int rc = tool_parse(argc, argv, OPT_OUTFILE | OPT_METRIC, plot_usage, &o);
    if (rc) return rc;
    if (!o.out) {
        fprintf(stderr, "tfc plot: missing -o FILE (see 'tfc plot --help')\n");
        return TOOL_USAGE;
    }
    struct tool_model m;
    if (tool_model_open("plot", o.model, 0, 0, &m)) return TOOL_FAIL;
    const char *names[TOOL_MAX_METRICS];
    int n_names = o.n_metrics, n_listed = 0;
    tfc_metric_info *listed = NULL;
    if (o.n_metrics) {
        memcpy(names, o.metrics, sizeof *names * (size_t)o.n_metrics);
    } else if (tfc_store_list_metrics(m.store, &n_listed, &listed)) {
        tool_error("plot", "%s: listing the metrics: %s", o.model, tfc_store_errmsg(m.store));
        tool_model_close(&m);
        return TOOL_FAIL;
    } else { /* every metric recorded, whatever logged it */
        n_names = n_listed < TOOL_MAX_METRICS ? n_listed : TOOL_MAX_METRICS;
        for (int i = 0; i < n_names; i++) names[i] = listed[i].name;
        if (n_listed > n_names)
            fprintf(stderr, "tfc plot: note: %s has %d metrics: plotting the first %d (choose "
                            "with --metric)\n", o.model, n_listed, n_names);
    }
    struct tool_series series[TOOL_MAX_METRICS];
    int n = 0;
    rc = TOOL_OK;
    for (int i = 0; i < n_names && !rc; i++) {
        struct tool_series s = {names[i], 0, NULL, NULL};
        tfc_status st = tfc_store_read_metric(m.store, names[i], &s.n, &s.steps, &s.values);
        if (st && st != TFC_ERR_NOT_FOUND) {
            rc = tool_error("plot", "metric '%s': %s", names[i], tfc_store_errmsg(m.store));
        } else if (st || s.n == 0) {
            if (o.n_metrics) rc = tool_error("plot", "%s: no metric '%s' in the model", o.model, names[i]);
        } else {
            series[n++] = s;
            continue;
        }
        free(s.steps);
        free(s.values);
    }
    if (!rc && n == 0) rc = tool_error("plot", "%s: the model has no metrics to plot", o.model);
    if (!rc) rc = tool_plot_write("plot", o.out, n, series);
    if (!rc) printf("wrote %s (%d metric%s)\n", o.out, n, n == 1 ? "" : "s");
    for (int i = 0; i < n; i++) {
        free(series[i].steps);
        free(series[i].values);
    }
    free(listed);
    tool_model_close(&m);
    return rc;
}
