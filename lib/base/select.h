/*
 * select.h - which tensors a tool works on: the --block, --role, --layer,
 * --expert and --name options every tool shares.
 *
 * Each option may be given several times and takes comma-separated values;
 * a tensor is selected when it matches every option given (any of the
 * values within one option). --block and --role take known names only (a
 * typo is a usage error naming the valid ones): the block types, and the
 * roles of the architecture's table (arch.h), "other", and the tool's own
 * (select_tool_roles). --layer takes numbers and ranges (0,3-5); -1
 * selects the tensors outside the layer stack. --expert takes the same
 * for a mixture of experts' experts (tensor.h's expert); -1 selects the
 * tensors of no expert. --name takes shell globs
 * (fnmatch), matched against the whole tensor name.
 *
 * The options are also kept as given (select_describe), so that a tool can
 * say which selection matched nothing in a file.
 */
#ifndef SW_SELECT_H
#define SW_SELECT_H

#include "status.h"
#include "tensor.h"

#define SELECT_MAX 64

/* --layer's or --expert's ranges, lo..hi; n 0: any */
struct select_ranges {
	int n;
	int lo[SELECT_MAX], hi[SELECT_MAX];
};

struct sw_select {
	unsigned blocks;                /* bit per enum sw_block; 0: any */
	int nroles, nglobs;
	char roles[SELECT_MAX][SW_ROLE_MAX];
	struct select_ranges layers, experts;
	char globs[SELECT_MAX][SW_NAME_MAX];
	const char *const *tool_roles;  /* NULL-terminated; roles only this tool prints */
	char desc[256];                 /* the options as given: "--role q,k --layer 0" */
};

void select_init(struct sw_select *s);

/* Roles a tool prints beyond the architecture's (sw-norms' lm_head_folded),
 * accepted by --role; call before select_add_roles. NULL-terminated, kept
 * by pointer. */
void select_tool_roles(struct sw_select *s, const char *const *roles);

/* Add the values of one option; SW_EUSAGE with a message on bad values. */
int select_add_blocks(struct sw_select *s, const char *arg, struct sw_err *err);
int select_add_roles(struct sw_select *s, const char *arg, struct sw_err *err);
int select_add_layers(struct sw_select *s, const char *arg, struct sw_err *err);
int select_add_experts(struct sw_select *s, const char *arg, struct sw_err *err);
int select_add_name(struct sw_select *s, const char *glob, struct sw_err *err);

/* Was any selection option given? */
int select_given(const struct sw_select *s);

/* The options given, as the user wrote them ("" for none; "..." ends a
 * description too long to keep). */
const char *select_describe(const struct sw_select *s);

int select_match(const struct sw_select *s, const char *name,
		 enum sw_block block, const char *role, int layer, int expert);
int select_match_info(const struct sw_select *s, const struct sw_tensor_info *t);

#endif
