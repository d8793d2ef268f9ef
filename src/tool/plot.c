/* plot.c: `tfc plot`: the store's metric curves (loss, accuracy, ...) against the step, one
 * panel per metric with axis labels and a legend (raw values, their moving average, per-epoch
 * validation points), on a linear or log y axis, as an SVG file, or as a PNG rasterized here
 * (polylines, axes, ticks and labels in a 3x5 pixel font) encoded with zlib's deflate and crc32. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>
#include "tool.h"

static const char plot_usage[] =
    "usage: tfc plot MODEL.db -o FILE.svg|FILE.png [--metric NAME ...] [--log-y]\n\n"
    "Draws the metrics logged in the model store (by `tfc train`: the \"train\" signature's loss\n"
    "and metrics at every step) against the step, one panel per metric: by default every\n"
    "metric recorded in the store, in the order first logged (at most 64), or the ones named\n"
    "by --metric. A gap in a series (steps missing over more than twice its usual spacing)\n"
    "is left as a gap in its line. FILE ending in .png gives a PNG image, anything else SVG.\n\n"
    "The x axis is the step, from a round number to the last step logged; the y axis is the\n"
    "metric. A long series (150 values or more) is drawn pale as logged (\"raw\") with its\n"
    "trailing moving average over 2% of its values on top (\"moving average of N values\");\n"
    "the legend says which is which. Validation metrics (val_*, one value per epoch, from\n"
    "`tfc train --val-data`) are drawn as points joined by a line, never smoothed.\n\n"
    "  --log-y    a logarithmic y axis (the label says \"log scale\"); values <= 0, which it\n"
    "             cannot show, are left out (the line breaks there) with a note on stderr\n"
    "             giving their count; a metric with no value > 0 is an error\n";

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

/* The step axis: whole ticks from a round number, ending at the last step hi itself (a tick
 * rounded up past it would draw an axis longer than the run), which gets a tick label. */
static void step_axis(double lo, double hi, struct axis *a)
{
    if (!(hi > lo)) lo = hi - 1;
    nice_axis(lo, hi, a);
    if (a->step < 1) { /* steps are whole */
        a->step = 1;
        a->decimals = 0;
        a->lo = floor(lo);
    }
    a->hi = hi;
    a->n_ticks = 0;
    for (double t = a->lo; t <= hi && a->n_ticks < 15; t += a->step) a->ticks[a->n_ticks++] = t;
    /* the last step's label would overlap a round tick just before it: it replaces that one */
    if (a->n_ticks > 1 && hi - a->ticks[a->n_ticks - 1] < 0.4 * a->step) a->n_ticks--;
    if (a->n_ticks == 0 || a->ticks[a->n_ticks - 1] < hi) a->ticks[a->n_ticks++] = hi;
}

/* A log10 axis over [lo, hi] (log10 of the values): ticks at the powers of ten, and at 2 and
 * 5 times them when the range spans two decades or less. */
static void log_axis(double lo, double hi, struct axis *a)
{
    a->lo = floor(lo);
    a->hi = ceil(hi);
    if (a->hi <= a->lo) a->hi = a->lo + 1;
    double decades = a->hi - a->lo, every = ceil(decades / 12);
    a->step = every;
    a->n_ticks = 0;
    a->decimals = -1; /* labels: the values, 10^t */
    for (double t = a->lo; t <= a->hi + 1e-9 && a->n_ticks < 16; t += every) {
        a->ticks[a->n_ticks++] = t;
        if (decades <= 2 && t < a->hi)
            for (int i = 0; i < 2 && a->n_ticks < 16; i++)
                a->ticks[a->n_ticks++] = t + log10(i ? 5.0 : 2.0);
    }
}

static void tick_label(const struct axis *a, double v, char *buf, size_t len)
{
    if (a->decimals < 0) { /* a log axis: the value */
        snprintf(buf, len, "%g", pow(10, v));
        return;
    }
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
    double *vals;       /* the values drawn: s->values, or their log10 (NaN for values <= 0) */
    double *smooth;     /* a moving average of the values when the series is long, else NULL */
    int window;         /* the moving average's length in values */
    int log_y;          /* the y axis is log10 */
    int per_epoch;      /* a validation metric: points joined by a line, never smoothed */
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

/* The trailing moving average of p->vals over p->window values, started again after a gap. */
static void moving_average(struct panel *p)
{
    const struct tool_series *s = p->s;
    double sum = 0;
    int count = 0, start = 0, window = p->window;
    for (int i = 0; i < s->n; i++) {
        if (gap_before(p, i)) sum = 0, count = 0, start = i;
        if (isfinite(p->vals[i])) sum += p->vals[i], count++;
        if (i - window >= start && isfinite(p->vals[i - window]))
            sum -= p->vals[i - window], count--;
        p->smooth[i] = count ? sum / count : NAN;
    }
}

/* A panel for s, its x axis covering [xlo, xhi] (shared by the panels). Long noisy series
 * (per-step losses) also get a trailing moving average over about 2% of their points, drawn
 * over the raw values in a paler colour; validation metrics (val_*) are per epoch, never
 * smoothed. With log_y, values <= 0 become NaN (not drawn) and *skipped counts them; the
 * average is of the values, taken to log10 with them. Returns -1 when out of memory. */
static int layout(const struct tool_series *s, double xlo, double xhi, int top, int log_y,
                  struct panel *p, int *skipped)
{
    p->s = s;
    p->log_y = log_y;
    p->per_epoch = !strncmp(s->name, "val_", 4);
    p->gap_over = gap_threshold(s);
    p->window = p->per_epoch ? 0 : s->n / 50;
    p->vals = malloc(sizeof *p->vals * (size_t)(s->n + 1));
    p->smooth = p->window >= 3 ? malloc(sizeof *p->smooth * (size_t)s->n) : NULL;
    if (!p->vals || (p->window >= 3 && !p->smooth)) return -1;
    *skipped = 0;
    for (int i = 0; i < s->n; i++) {
        p->vals[i] = s->values[i];
        if (log_y && s->values[i] <= 0) p->vals[i] = NAN, ++*skipped;
    }
    if (p->smooth) moving_average(p);
    double ylo = INFINITY, yhi = -INFINITY;
    for (int i = 0; i < s->n; i++) {
        if (log_y) {
            p->vals[i] = log10(p->vals[i]); /* NaN stays NaN */
            if (p->smooth) p->smooth[i] = log10(p->smooth[i]);
        }
        if (!isfinite(p->vals[i])) continue;
        ylo = fmin(ylo, p->vals[i]);
        yhi = fmax(yhi, p->vals[i]);
    }
    if (!isfinite(ylo)) ylo = 0, yhi = 1;
    step_axis(xlo, xhi, &p->ax);
    if (log_y) log_axis(ylo, yhi, &p->ay);
    else nice_axis(ylo, yhi, &p->ay);
    p->top = top;
    p->x0 = ML;
    p->x1 = W - MR;
    p->y0 = top + MT;
    p->y1 = top + PANEL_H - MB;
    return 0;
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

/* The y axis label: the metric's name, and the scale when it is not linear. */
static void y_label(const struct panel *p, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s", p->s->name, p->log_y ? " (log scale)" : "");
}

/* The legend: what each drawn line is. Entry 0 is the series as logged; entry 1, when there
 * is one, its moving average. *marker: entry 0 is drawn with a marker per point. */
static int legend(const struct panel *p, char text[2][96], int *marker)
{
    *marker = p->per_epoch;
    if (p->per_epoch) {
        snprintf(text[0], 96, "per epoch (not smoothed)");
        return 1;
    }
    if (!p->smooth) {
        snprintf(text[0], 96, "raw (not smoothed)");
        return 1;
    }
    snprintf(text[0], 96, "raw");
    snprintf(text[1], 96, "moving average of %d values", p->window);
    return 2;
}

/* The panel's title, axis labels, grid, ticks and tick labels, and frame. */
static void svg_axes(FILE *f, const struct panel *p)
{
    char buf[160];
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"14\" font-weight=\"bold\">", p->x0,
            p->top + 20);
    svg_text(f, p->s->name);
    fprintf(f, "</text>\n");
    for (int i = 0; i < p->ay.n_ticks; i++) {
        double y = py(p, p->ay.ticks[i]);
        tick_label(&p->ay, p->ay.ticks[i], buf, sizeof buf);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>"
                   "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"black\"/>"
                   "<text class=\"ytick\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                p->x0, y, p->x1, y, p->x0 - 5, y, p->x0, y, p->x0 - 8, y + 4, buf);
    }
    for (int i = 0; i < p->ax.n_ticks; i++) {
        double x = px(p, p->ax.ticks[i]);
        tick_label(&p->ax, p->ax.ticks[i], buf, sizeof buf);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e5e5e5\"/>"
                   "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\"/>"
                   "<text class=\"xtick\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                x, p->y0, x, p->y1, x, p->y1, x, p->y1 + 5, x, p->y1 + 17, buf);
    }
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
               "stroke=\"black\"/>\n", p->x0, p->y0, p->x1 - p->x0, p->y1 - p->y0);
    fprintf(f, "<text class=\"xlabel\" x=\"%d\" y=\"%d\" text-anchor=\"middle\" "
               "fill=\"#555\">step</text>\n", (p->x0 + p->x1) / 2, p->y1 + 32);
    int ym = (p->y0 + p->y1) / 2;
    y_label(p, buf, sizeof buf);
    fprintf(f, "<text class=\"ylabel\" x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\" "
               "text-anchor=\"middle\" fill=\"#555\">", ym, ym);
    svg_text(f, buf);
    fprintf(f, "</text>\n");
}

/* The legend at the panel's top right: a sample of each line and what it is. */
static void svg_legend(FILE *f, const struct panel *p, const unsigned char *c)
{
    char text[2][96];
    int marker, n = legend(p, text, &marker);
    int x = p->x1 - 230, y = p->top + 8;
    fprintf(f, "<g class=\"legend\">\n");
    for (int i = 0; i < n; i++, y += 13) {
        int pale = p->smooth && i == 0;
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"rgb(%d,%d,%d)\" "
                   "stroke-width=\"%s\" stroke-opacity=\"%s\"/>", x, y, x + 20, y, c[0], c[1],
                c[2], pale ? "1" : "1.5", pale ? "0.35" : "1");
        if (marker)
            fprintf(f, "<circle cx=\"%d\" cy=\"%d\" r=\"3\" fill=\"rgb(%d,%d,%d)\"/>", x + 10, y,
                    c[0], c[1], c[2]);
        fprintf(f, "<text x=\"%d\" y=\"%d\">", x + 26, y + 4);
        svg_text(f, text[i]);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "</g>\n");
}

/* A line of values (the series' or its average), with a dot on isolated points, or on every
 * point with markers. */
static void svg_line(FILE *f, const struct panel *p, const double *values, int pale, int markers,
                     const unsigned char *c)
{
    int np;
    struct pt *pts = points(p, values, &np);
    fprintf(f, "<path fill=\"none\" stroke=\"rgb(%d,%d,%d)\" stroke-width=\"%s\" "
               "stroke-opacity=\"%s\" stroke-linejoin=\"round\" d=\"", c[0], c[1], c[2],
            pale ? "1" : "1.5", pale ? "0.35" : "1");
    for (int i = 0; i < np; i++)
        fprintf(f, "%s%.1f %.1f", pts[i].pen_up ? (i ? " M" : "M") : " L", pts[i].x, pts[i].y);
    fprintf(f, "\"/>\n");
    for (int i = 0; i < np; i++)
        if (markers || (pts[i].pen_up && (i + 1 == np || pts[i + 1].pen_up)))
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"rgb(%d,%d,%d)\"/>\n",
                    pts[i].x, pts[i].y, c[0], c[1], c[2]);
    free(pts);
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
        fprintf(f, "<g class=\"panel\">\n");
        svg_axes(f, p);
        /* the series first (the test reads a panel's first path), its average over it */
        svg_line(f, p, p->vals, p->smooth != NULL, p->per_epoch, c);
        if (p->smooth) svg_line(f, p, p->smooth, 0, 0, c);
        svg_legend(f, p, c);
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
static const char font_chars[] = "0123456789.-+abcdefghijklmnopqrstuvwxyz_/:()";
static const char font_rows[][6] = {
    "75557", "26227", "71747", "71717", "55711", "74717", "74757", "71111", "75757", "75717",
    "00002", "00700", "02720",
    "25755", "65656", "74447", "65556", "74647", "74644", "74557", "55755", "72227", "11157",
    "55655", "44447", "57755", "65555", "25552", "65644", "25563", "65655", "34216", "72222",
    "55557", "55552", "55775", "55255", "55222", "71247",
    "00007", "11244", "02020", "24442", "21112",
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

/* Draws s rotated a quarter turn anticlockwise (read upwards), centred on (x, ym). */
static void text_up(struct canvas *c, int x, int ym, const char *s, const unsigned char *col)
{
    int cy = ym + text(c, 0, 0, s, col, 0) / 2;
    for (; *s; s++, cy -= 8) {
        char ch = *s >= 'A' && *s <= 'Z' ? (char)(*s - 'A' + 'a') : *s;
        const char *hit = strchr(font_chars, ch);
        if (!hit || !ch) continue;
        const char *rows = font_rows[hit - font_chars];
        for (int r = 0; r < 5; r++) /* a glyph's top row faces left */
            for (int b = 0; b < 3; b++)
                if ((rows[r] - '0') & (4 >> b))
                    for (int d = 0; d < 4; d++)
                        put(c, x + r * 2 + d % 2, cy - b * 2 - d / 2, col);
    }
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

static const unsigned char black[3] = {0, 0, 0}, grid[3] = {229, 229, 229},
                           grey[3] = {90, 90, 90};

/* A series' line (pale: the raw values under their average), with a dot on isolated points,
 * or on every point with markers. */
static void png_line(struct canvas *c, const struct panel *p, const double *values, int faint,
                     int markers, const unsigned char *col)
{
    unsigned char pale[3];
    for (int i = 0; i < 3; i++) pale[i] = (unsigned char)(255 - (255 - col[i]) * 35 / 100);
    int np;
    struct pt *pts = points(p, values, &np);
    for (int i = 0; i < np; i++) {
        if (!pts[i].pen_up)
            line(c, pts[i - 1].x, pts[i - 1].y, pts[i].x, pts[i].y, faint ? pale : col,
                 faint ? 1 : 2);
        if (markers || (pts[i].pen_up && (i + 1 == np || pts[i + 1].pen_up))) /* a dot */
            for (int dy = -2; dy <= 2; dy++)
                line(c, pts[i].x - 2, pts[i].y + dy, pts[i].x + 2, pts[i].y + dy, col, 1);
    }
    free(pts);
}

/* Title, axis labels, ticks, frame and legend of a panel. */
static void png_axes(struct canvas *c, const struct panel *p, const unsigned char *col)
{
    char buf[160], legend_text[2][96];
    text(c, p->x0, p->top + 10, p->s->name, black, 1);
    for (int i = 0; i < p->ay.n_ticks; i++) {
        double y = py(p, p->ay.ticks[i]);
        line(c, p->x0, y, p->x1, y, grid, 1);
        line(c, p->x0 - 5, y, p->x0, y, black, 1);
        tick_label(&p->ay, p->ay.ticks[i], buf, sizeof buf);
        int w = text(c, 0, 0, buf, black, 0);
        text(c, p->x0 - 8 - w, (int)y - 5, buf, grey, 1);
    }
    for (int i = 0; i < p->ax.n_ticks; i++) {
        double x = px(p, p->ax.ticks[i]);
        line(c, x, p->y0, x, p->y1, grid, 1);
        line(c, x, p->y1, x, p->y1 + 5, black, 1);
        tick_label(&p->ax, p->ax.ticks[i], buf, sizeof buf);
        int w = text(c, 0, 0, buf, black, 0);
        text(c, (int)x - w / 2, p->y1 + 9, buf, grey, 1);
    }
    line(c, p->x0, p->y0, p->x1, p->y0, black, 1);
    line(c, p->x0, p->y1, p->x1, p->y1, black, 1);
    line(c, p->x0, p->y0, p->x0, p->y1, black, 1);
    line(c, p->x1, p->y0, p->x1, p->y1, black, 1);
    text(c, (p->x0 + p->x1) / 2 - text(c, 0, 0, "step", grey, 0) / 2, p->y1 + 24, "step", grey, 1);
    y_label(p, buf, sizeof buf);
    text_up(c, 4, (p->y0 + p->y1) / 2, buf, grey);
    int marker, n = legend(p, legend_text, &marker);
    for (int i = 0, x = p->x1 - 300, y = p->top + 6; i < n; i++, y += 13) {
        int faint = p->smooth && i == 0;
        unsigned char pale[3];
        for (int j = 0; j < 3; j++) pale[j] = (unsigned char)(255 - (255 - col[j]) * 35 / 100);
        line(c, x, y + 4, x + 20, y + 4, faint ? pale : col, faint ? 1 : 2);
        for (int dy = -2; marker && dy <= 2; dy++) line(c, x + 8, y + 4 + dy, x + 12, y + 4 + dy, col, 1);
        text(c, x + 26, y, legend_text[i], grey, 1);
    }
}

static int write_png(FILE *f, int n, const struct panel *panels)
{
    struct canvas c = {W, n * PANEL_H, NULL};
    c.rgb = malloc((size_t)c.w * (size_t)c.h * 3);
    if (!c.rgb) return -1;
    memset(c.rgb, 255, (size_t)c.w * (size_t)c.h * 3);
    for (int k = 0; k < n; k++) {
        const struct panel *p = &panels[k];
        const unsigned char *col = palette[k % (sizeof palette / sizeof palette[0])];
        png_axes(&c, p, col);
        png_line(&c, p, p->vals, p->smooth != NULL, p->per_epoch, col);
        if (p->smooth) png_line(&c, p, p->smooth, 0, 0, col);
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

/* The panels of the series, on the x range of all of them; with log_y, a note for each series
 * with values <= 0 (left out), and an error for one with no value > 0. */
static int layout_all(const char *cmd, int n, const struct tool_series *series, int log_y,
                      struct panel *panels)
{
    double xlo = INFINITY, xhi = -INFINITY;
    for (int k = 0; k < n; k++)
        for (int i = 0; i < series[k].n; i++) {
            xlo = fmin(xlo, (double)series[k].steps[i]);
            xhi = fmax(xhi, (double)series[k].steps[i]);
        }
    if (!isfinite(xlo)) xlo = 0, xhi = 1;
    for (int k = 0; k < n; k++) {
        int skipped;
        if (layout(&series[k], xlo, xhi, k * PANEL_H, log_y, &panels[k], &skipped))
            return tool_error(cmd, "out of memory");
        if (skipped == series[k].n)
            return tool_error(cmd, "--log-y: metric '%s' has no value > 0 to draw on a log "
                              "scale (plot it without --log-y)", series[k].name);
        if (skipped)
            fprintf(stderr, "tfc %s: note: --log-y: metric '%s' has %d value%s <= 0 (of %d), "
                            "left out of its line\n", cmd, series[k].name, skipped,
                    skipped == 1 ? "" : "s", series[k].n);
    }
    return TOOL_OK;
}

int tool_plot_write(const char *cmd, const char *path, int n, const struct tool_series *series,
                    int log_y)
{
    struct panel *panels = calloc((size_t)n + 1, sizeof *panels);
    if (!panels) return tool_error(cmd, "out of memory");
    int bad = layout_all(cmd, n, series, log_y, panels);
    size_t len = strlen(path);
    int png = len > 4 && !strcasecmp(path + len - 4, ".png");
    FILE *f = bad ? NULL : fopen(path, "wb");
    if (!bad && !f) bad = tool_error(cmd, "%s: %s", path, strerror(errno));
    if (f) {
        int failed = png ? write_png(f, n, panels) : write_svg(f, n, panels);
        failed |= ferror(f);
        failed |= fclose(f) != 0;
        if (failed) {
            remove(path);
            bad = tool_error(cmd, "%s: cannot write the image", path);
        }
    }
    for (int k = 0; k < n; k++) {
        free(panels[k].vals);
        free(panels[k].smooth);
    }
    free(panels);
    return bad;
}

int cmd_plot(int argc, char **argv)
{
    struct tool_opts o;
    int rc = tool_parse(argc, argv, OPT_OUTFILE | OPT_METRIC | OPT_LOG_Y, plot_usage, &o);
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
    if (!rc) rc = tool_plot_write("plot", o.out, n, series, o.log_y);
    if (!rc) printf("wrote %s (%d metric%s)\n", o.out, n, n == 1 ? "" : "s");
    for (int i = 0; i < n; i++) {
        free(series[i].steps);
        free(series[i].values);
    }
    free(listed);
    tool_model_close(&m);
    return rc;
}
