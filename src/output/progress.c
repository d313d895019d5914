/* output/progress.c - the progress line (see progress.h). */
#include "output/progress.h"

#include <inttypes.h>

#define BAR 20

static void fmt_us(int64_t us, char *buf, size_t size)
{
    if (us < 1000)
        snprintf(buf, size, "%" PRId64 "µs", us);
    else if (us < 1000000)
        snprintf(buf, size, "%.2fms", (double)us / 1e3);
    else
        snprintf(buf, size, "%.2fs", (double)us / 1e6);
}

void sq_progress_tick(struct sq_progress *p, const struct sq_second *s)
{
    p->errors_so_far += s->errors;
    p->completed_so_far += s->completed;
    int sec = (int)(s->t_s + 0.5);
    /* Elsewhere than a terminal, a line every every_s seconds: none for a run shorter than
     * that (its last, partial second rounds to 0). */
    if (!p->tty && (p->every_s <= 0 || sec < p->every_s || sec % p->every_s != 0))
        return;
    double rps = s->len_s > 0 ? (double)s->completed / s->len_s : 0;
    char p99[24];
    fmt_us(s->p99_us, p99, sizeof(p99));
    if (p->tty) {
        fputs("\r\033[K", p->f);
        if (p->length_s > 0) {
            double frac = s->t_s / p->length_s;
            int fill = (int)(frac * BAR + 0.5);
            if (fill > BAR)
                fill = BAR;
            fputc('[', p->f);
            for (int i = 0; i < BAR; i++)
                fputs(i < fill ? "█" : "░", p->f);
            fprintf(p->f, "] %.0fs/%.0fs ", s->t_s, p->length_s);
        } else {
            fprintf(p->f, "%.0fs ", s->t_s);
        }
    } else {
        fprintf(p->f, "[%6.1fs] ", s->t_s);
    }
    fprintf(p->f, "%s %" PRIu64 " · %.0f req/s · p99 %s · %s%" PRIu64 " errors%s",
            p->open ? "in flight" : "VUs", s->active, rps, p99,
            p->errors_so_far && p->color ? "\033[31m" : "", p->errors_so_far,
            p->errors_so_far && p->color ? "\033[0m" : "");
    if (s->dropped)
        fprintf(p->f, " · %" PRIu64 " dropped", s->dropped);
    if (!p->tty)
        fputc('\n', p->f);
    p->drawn = p->tty;
    fflush(p->f);
}

void sq_progress_finish(struct sq_progress *p)
{
    if (p->drawn) {
        fputs("\r\033[K", p->f);
        fflush(p->f);
    }
    p->drawn = false;
}
