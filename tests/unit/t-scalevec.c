/*
 * Unit tests of lib/analysis/scalevec.c against values worked out by hand:
 * the statistics of a small gain, a zero entry (anisotropy inf), a mean of
 * zero (cv undefined), Pearson's r of |g| with column norms (a perfect
 * line, its mirror, a constant side), and where each role sits.
 */
#include <math.h>
#include <string.h>

#include "../../lib/analysis/scalevec.h"
#include "tap.h"

static void stats_by_hand(void)
{
	/* g = 1 2 3 -4: mean 0.5, population variance (0.25+2.25+6.25+20.25)/4 = 7.25 */
	const float g[] = {1, 2, 3, -4}, z[] = {0, 2}, c[] = {-1, 1};
	struct scalevec_stats s;

	scalevec_stats(g, 4, &s);
	ok(s.n == 4 && s.mean == 0.5 && close_rel(s.sd, sqrt(7.25), 1e-15),
	   "mean 0.5, sd sqrt(7.25): %.17g %.17g", s.mean, s.sd);
	ok(s.min == -4 && s.max == 3, "min -4, max 3");
	ok(s.anisotropy == 4 && close_rel(s.cv, sqrt(7.25) / 0.5, 1e-15),
	   "anisotropy max|g|/min|g| = 4/1, cv sd/|mean|");
	ok(isnan(s.coupling), "no coupling from the statistics alone");
	scalevec_stats(z, 2, &s);
	ok(isinf(s.anisotropy), "a zero entry: anisotropy inf");
	scalevec_stats(c, 2, &s);
	ok(s.mean == 0 && isnan(s.cv) && s.anisotropy == 1, "mean 0: cv undefined; |g| equal: 1");
}

static void coupling_by_hand(void)
{
	const float g[] = {1, -2, 3, 4};
	const double line[] = {5, 7, 9, 11}, mirror[] = {11, 9, 7, 5}, flat[] = {2, 2, 2, 2},
		     part[] = {1, 0, 1, 0};

	ok(close_rel(scalevec_coupling(g, line, 4), 1, 1e-15), "|g| on a rising line: r = 1");
	ok(close_rel(scalevec_coupling(g, mirror, 4), -1, 1e-15), "on a falling line: r = -1");
	ok(isnan(scalevec_coupling(g, flat, 4)), "constant column norms: undefined");
	/* |g| = 1 2 3 4, mean 2.5; b = 1 0 1 0, mean 0.5: sab = -1, saa = 5, sbb = 1 */
	ok(close_rel(scalevec_coupling(g, part, 4), -1 / sqrt(5), 1e-15), "r = -1/sqrt(5)");
}

static void places(void)
{
	struct sw_tensor_info t = {.block = SW_BLOCK_NORM};

	ok(!strcmp(scalevec_branch("attn_norm"), "attn") && !strcmp(scalevec_branch("q_norm"), "attn") &&
	   !strcmp(scalevec_branch("down_in_norm"), "ffn") && !strcmp(scalevec_branch("final_norm"), "head") &&
	   !strcmp(scalevec_branch("lm_head_mult"), "head") && !strcmp(scalevec_branch("embed_mult"), "emb"),
	   "branches by role");
	strcpy(t.role, "k_norm");
	ok(!strcmp(scalevec_placement(&t), "qk"), "k_norm: qk");
	strcpy(t.role, "o_in_norm");
	ok(!strcmp(scalevec_placement(&t), "in"), "o_in_norm: in");
	strcpy(t.role, "ffn_norm");
	ok(!strcmp(scalevec_placement(&t), "pre"), "ffn_norm: pre");
	strcpy(t.role, "up_norm");
	ok(!strcmp(scalevec_placement(&t), "dnp"), "up_norm: dnp");
	strcpy(t.role, "q_gain_in");
	ok(!strcmp(scalevec_placement(&t), "before"), "q_gain_in: before");
	strcpy(t.role, "lm_head_gain_out_dir");
	ok(!strcmp(scalevec_placement(&t), "after"), "a gain's direction: where the gain sits (after)");
	strcpy(t.role, "k_norm_mag");
	ok(!strcmp(scalevec_placement(&t), "qk"), "a gain's magnitude: where the gain sits (qk)");
	strcpy(t.role, "nonesuch");
	ok(!strcmp(scalevec_placement(&t), "pre"), "a role the table does not know: pre");
	strcpy(t.role, "attn_post_norm");
	ok(!strcmp(scalevec_placement(&t), "post"), "attn_post_norm: post");
	t.block = SW_BLOCK_MULT;
	ok(!strcmp(scalevec_placement(&t), "mult"), "a multiplier: mult");
	ok(scalevec_readers("attn_norm") && !strcmp(scalevec_readers("attn_norm")[2], "v") &&
	   !scalevec_readers("attn_norm")[3] && !scalevec_readers("q_norm"),
	   "attn_norm is read by q, k, v; q_norm by no matrix");
	ok(!strcmp(scalevec_reader_tied("lm_head"), "embed") && !scalevec_reader_tied("q"),
	   "a tied head is read as the embedding; nothing stands for q");
}

int main(void)
{
	stats_by_hand();
	coupling_by_hand();
	places();
	return tap_done();
}
