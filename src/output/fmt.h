/* output/fmt.h - number, duration and size formatting shared by the terminal outputs.
 *
 * Each helper writes into the caller's buffer and returns it.
 */
#ifndef SQ_OUTPUT_FMT_H
#define SQ_OUTPUT_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct sq_hist;

/* "1,234,567" */
const char *sq_fmt_group(uint64_t v, char *buf, size_t size);
/* "76,530.0": v with thousands separators and `decimals` digits after the point. */
const char *sq_fmt_group_real(double v, int decimals, char *buf, size_t size);
/* A duration given in µs with a unit that keeps three or four significant digits: "850µs",
 * "1.25ms", "2.00s". */
const char *sq_fmt_dur_us(double us, char *buf, size_t size);
/* A byte count in binary units: "512 B", "1.50 KiB". */
const char *sq_fmt_bytes(double b, char *buf, size_t size);
/* Prints s padded to width terminal columns (UTF-8 aware: "µ" is two bytes, one column). */
void sq_fmt_pad(FILE *f, const char *s, int width, bool right);
/* Prints the "Latency distribution" block of the summary: up to ten rows from min to p99.9 on
 * log-spaced bounds (each row's upper bound a constant factor above its lower one, so a tail
 * ten times the median still gets rows of its own) and a row for what lies above. Prints nothing
 * for an empty histogram. */
void sq_fmt_distribution(FILE *f, const struct sq_hist *h);

#endif
