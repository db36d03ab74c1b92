/* Unit tests of lib/base/arch.c: Hugging Face names, roles, shapes, model order;
 * RoPE's frequency table and what a model refuses of a config. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/base/arch.h"
#include "../../lib/base/family.h"
#include "tap.h"

static const struct sw_config cfg = {
	.arch = "llama", .vocab_size = 100, .d_model = 64, .n_layers = 12, .n_heads = 8,
	.n_kv_heads = 2, .head_dim = 8, .d_ff = 176, .seq_len = 128, .rope_theta = 1e4,
	.norm_eps = 1e-5, .multipliers = "none",
};

static int name_is(const char *hf, const char *role, enum sw_block b, int layer,
		   enum sw_norm_type nt)
{
	struct sw_tensor_info t;
	memset(&t, 0, sizeof t);
	return arch_info_from_hf_name(&cfg, hf, &t) == 0 && !strcmp(t.role, role) &&
	       t.block == b && t.layer == layer && t.norm_type == nt && !strcmp(t.name, hf);
}

/*
 * RoPE's inverse frequencies against transformers' formulas
 * (modeling_rope_utils.py, _compute_linear_scaling_rope_parameters and
 * _compute_llama3_parameters) written here again in double: within 1e-6
 * relative (arch_rope_inv_freq computes in float32, as torch does: a few
 * roundings of 6e-8 each; a wrong band or factor is off by 2x to 32x).
 * The bands seen: *kept, *divided, *smoothed count each branch taken.
 */
static double rope_worst(const struct sw_config *c, int *kept, int *divided, int *smoothed)
{
	float inv[64];
	double worst = 0;
	int half = (int)c->head_dim / 2;

	*kept = *divided = *smoothed = 0;
	if (arch_rope_inv_freq(c, inv) < 0)
		return INFINITY;
	for (int i = 0; i < half; i++) {
		double base = 1.0 / pow(c->rope_theta, 2.0 * i / (double)c->head_dim), want = base;
		if (!strcmp(c->rope_type, "linear")) {
			want = base / c->rope_factor;
			++*divided;
		} else if (!strcmp(c->rope_type, "llama3")) {
			double w = 2 * M_PI / base, n = (double)c->rope_original_max,
			       lo = c->rope_low_freq_factor, hi = c->rope_high_freq_factor;
			if (w < n / hi) {
				++*kept;
			} else if (w > n / lo) {
				want = base / c->rope_factor;
				++*divided;
			} else {
				double s = (n / w - lo) / (hi - lo);
				want = (1 - s) * base / c->rope_factor + s * base;
				++*smoothed;
			}
		} else {
			++*kept;
		}
		worst = fmax(worst, fabs(inv[i] - want) / want);
	}
	return worst;
}

static struct sw_tensor_info shaped(const char *role, int layer, int rank, int64_t a, int64_t b)
{
	struct sw_tensor_info t;
	memset(&t, 0, sizeof t);
	arch_info_for_role(&cfg, role, layer, &t);
	t.rank = rank;
	t.shape[0] = a;
	t.shape[1] = b;
	return t;
}

int main(void)
{
	struct sw_err err;
	struct sw_tensor_info t, list[6];
	struct sw_config bad;

	ok(name_is("model.embed_tokens.weight", "embed", SW_BLOCK_EMB, -1, SW_NORM_NONE), "embedding");
	ok(name_is("model.layers.3.self_attn.q_proj.weight", "q", SW_BLOCK_QK, 3, SW_NORM_NONE), "q_proj");
	ok(name_is("model.layers.11.self_attn.k_proj.weight", "k", SW_BLOCK_QK, 11, SW_NORM_NONE), "k_proj of layer 11");
	ok(name_is("model.layers.0.self_attn.v_proj.weight", "v", SW_BLOCK_VO, 0, SW_NORM_NONE), "v_proj");
	ok(name_is("model.layers.0.self_attn.o_proj.weight", "o", SW_BLOCK_VO, 0, SW_NORM_NONE), "o_proj");
	ok(name_is("model.layers.2.mlp.down_proj.weight", "down", SW_BLOCK_FFN, 2, SW_NORM_NONE), "down_proj");
	ok(name_is("model.layers.2.input_layernorm.weight", "attn_norm", SW_BLOCK_NORM, 2, SW_NORM_INPUT),
	   "input_layernorm is an Input-Norm");
	ok(name_is("model.layers.2.post_attention_layernorm.weight", "ffn_norm", SW_BLOCK_NORM, 2, SW_NORM_INPUT),
	   "Llama's post_attention_layernorm is an Input-Norm (it feeds the MLP)");
	ok(name_is("model.layers.2.self_attn.q_norm.weight", "q_norm", SW_BLOCK_NORM, 2, SW_NORM_OUTPUT),
	   "q_norm is an Output-Norm");
	ok(name_is("model.norm.weight", "final_norm", SW_BLOCK_NORM, -1, SW_NORM_INPUT), "final norm");
	ok(name_is("lm_head.weight", "lm_head", SW_BLOCK_OUT, -1, SW_NORM_NONE), "lm_head");
	ok(name_is("model.layers.1.self_attn.q_proj.bias", "q_bias", SW_BLOCK_QK, 1, SW_NORM_NONE), "Qwen2 q bias");
	ok(name_is("model.layers.1.self_attn.rotary_emb.inv_freq", "other", SW_BLOCK_OTHER, 1, SW_NORM_NONE),
	   "rotary buffer: other, in its layer");
	ok(name_is("model.layers.x.mlp.up_proj.weight", "other", SW_BLOCK_OTHER, -1, SW_NORM_NONE), "bad layer number: other");
	memset(&t, 0, sizeof t);
	ok(arch_info_from_hf_name(&cfg, "model.layers.12.mlp.up_proj.weight", &t) < 0, "layer 12 of 12 refused");
	ok(arch_info_from_hf_name(&cfg, "model.layers.99999999999.mlp.up_proj.weight", &t) < 0 ||
	   t.block == SW_BLOCK_OTHER, "huge layer number does not overflow");

	/* attention projections carry their head counts (GQA: k, v have KV heads) */
	t = shaped("k", 0, 2, 16, 64);
	ok(t.n_heads == 2 && t.head_dim == 8, "k carries n_kv_heads and head_dim");
	t = shaped("q", 0, 2, 64, 64);
	ok(t.n_heads == 8 && t.head_dim == 8, "q carries n_heads");

	/* the heads column: RoPE rows q and k (and no other role), v by
	 * rows, o by columns; biases and unknown roles none (a fused qkv
	 * is no role: it is read as its parts q, k, v) */
	ok(arch_role_heads("q") == ARCH_HEADS_ROWS_ROPE && arch_role_heads("k") == ARCH_HEADS_ROWS_ROPE,
	   "q and k: heads by RoPE-rotated rows");
	ok(arch_role_heads("v") == ARCH_HEADS_ROWS, "v: heads by rows, not rotated");
	ok(arch_role_heads("o") == ARCH_HEADS_COLS, "o: heads by columns");
	/* the projections into the residual stream: o and the downs, no
	 * other role of the table */
	{
		int writes = 0;
		const struct arch_role *r;
		for (size_t i = 0; (r = arch_role_at(i)); i++)
			writes += arch_role_writes_residual(r->name);
		ok(writes == 4 && arch_role_writes_residual("o") && arch_role_writes_residual("down") &&
		   arch_role_writes_residual("expert_down") && arch_role_writes_residual("shared_down") &&
		   !arch_role_writes_residual("v") && !arch_role_writes_residual("nonesuch"),
		   "o, down, expert_down, shared_down write into the residual stream (%d roles)", writes);
	}
	ok(family_find("qwen2")->model == (FAMILY_MODEL | FAMILY_QKV_BIAS) &&
	   family_find("llama")->model == FAMILY_MODEL && family_find("mistral")->model == FAMILY_MODEL &&
	   family_find("qwen3")->model == (FAMILY_MODEL | FAMILY_QK_NORM),
	   "qwen2 alone of the model's families has q, k, v biases, qwen3 alone QK-norm");
	ok(family_model_flags("Qwen3ForCausalLM") == (FAMILY_MODEL | FAMILY_QK_NORM) &&
	   family_model_flags("phi3") == 0 && family_model_flags("nonesuch") == 0 &&
	   family_model_flags("gemma2") == (FAMILY_MODEL | FAMILY_EMBED_SCALE | FAMILY_POST_NORMS) &&
	   family_model_flags("GemmaForCausalLM") == (FAMILY_MODEL | FAMILY_EMBED_SCALE) &&
	   family_model_flags("gpt2") == (FAMILY_MODEL | FAMILY_LAYERNORM | FAMILY_POS_EMBED |
					  FAMILY_PLAIN_MLP | FAMILY_LINEAR_BIAS),
	   "a family's flags by class or type; 0 for one read for its matrices or unknown");
	ok(arch_role_heads("q_bias") == ARCH_HEADS_NONE && !arch_role_find("qkv") &&
	   arch_role_heads("lm_head") == ARCH_HEADS_NONE && arch_role_heads("nonesuch") == ARCH_HEADS_NONE,
	   "q_bias, lm_head and an unknown role: no heads; qkv no role");
	{
		int with_heads = 0;
		const struct arch_role *r;
		for (size_t i = 0; (r = arch_role_at(i)); i++)
			with_heads += r->heads != ARCH_HEADS_NONE;
		ok(with_heads == 4, "four roles of the table have heads (%d)", with_heads);
		int tied = 0;
		for (size_t i = 0; (r = arch_role_at(i)); i++)
			tied += r->tied != NULL;
		ok(tied == 1 && !strcmp(arch_role_find("lm_head")->tied, "embed"),
		   "the head alone may be tied, to the embedding (%d)", tied);
	}
	ok(arch_sv_kind_of("q") == ARCH_SV_ATTN && arch_sv_kind_of("v") == ARCH_SV_ATTN &&
	   arch_sv_kind_of("up") == ARCH_SV_FFN && arch_sv_kind_of("lm_head") == ARCH_SV_HEAD,
	   "the Pre-Norms' readers have their scale-vector kinds");
	ok(arch_sv_kind_of("o") == -1 && arch_sv_kind_of("down") == -1 && arch_sv_kind_of("q_gain_in") == -1 &&
	   arch_sv_kind_of("nonesuch") == -1, "o, down, a gain and an unknown role read no Pre-Norm");

	/* shapes against the config */
	t = shaped("q", 0, 2, 64, 64);
	ok(arch_check_shape(&cfg, &t, &err) == SW_OK, "q 64x64 fits");
	t = shaped("k", 0, 2, 64, 64);
	ok(arch_check_shape(&cfg, &t, &err) == SW_EDATA && strstr(err.msg, "16x64"), "k 64x64 refused: %s", err.msg);
	t = shaped("embed", -1, 2, 100, 64);
	ok(arch_check_shape(&cfg, &t, &err) == SW_OK, "embed stored [V, D]");
	t = shaped("down", 0, 2, 64, 176);
	ok(arch_check_shape(&cfg, &t, &err) == SW_OK, "down [D, F]");
	t = shaped("final_norm", -1, 1, 63, 0);
	ok(arch_check_shape(&cfg, &t, &err) == SW_EDATA, "norm of 63 refused");
	t = shaped("q_norm", 0, 1, 8, 0);
	ok(arch_check_shape(&cfg, &t, &err) == SW_OK, "q_norm per head");
	t = shaped("o_mult", 0, 1, 64, 0);
	ok(arch_check_shape(&cfg, &t, &err) == SW_OK, "row multiplier of o");
	t = shaped("o_mult", 0, 1, 65, 0);
	ok(arch_check_shape(&cfg, &t, &err) == SW_EDATA, "multiplier of 65 refused");

	/* the shape column: each role's shape in the config's sizes (cfg: V
	 * 100, D 64, H 8, KV 2, hd 8, F 176), the messages word for word */
	{
		static const struct {
			const char *role;
			int rank;
			int64_t a, b;
		} want[] = {
			{"embed", 2, 100, 64}, {"q", 2, 64, 64}, {"k", 2, 16, 64}, {"v", 2, 16, 64},
			{"o", 2, 64, 64}, {"gate", 2, 176, 64}, {"up", 2, 176, 64}, {"down", 2, 64, 176},
			{"lm_head", 2, 100, 64}, {"attn_norm", 1, 64, 0}, {"final_norm", 1, 64, 0},
			{"k_bias", 1, 16, 0}, {"v_norm", 1, 8, 0}, {"o_in_norm", 1, 64, 0},
			{"down_in_norm", 1, 176, 0}, {"up_gain_out", 1, 176, 0}, {"down_mult_col", -1, 0, 0},
			{"lm_head_gain_out_dir", 1, 100, 0}, {"q_norm", -1, 0, 0}, {"q_mult", -1, 0, 0},
			{"k_mag", -1, 0, 0}, {"qkv", -1, 0, 0}, {"nonesuch", -1, 0, 0},
		};
		static const struct {
			const char *role;
			int rank;
			int64_t a, b;
			const char *msg;
		} refused[] = {
			{"k", 2, 64, 64, "shape 64x64 disagrees with the config (16x64)"},
			{"embed", 2, 64, 100, "shape 64x100 disagrees with the config (100x64)"},
			{"o_in_norm", 1, 63, 0, "shape 63 disagrees with the config (64)"},
			{"k_norm", 1, 9, 0, "shape 9 disagrees with the config (8 or 16)"},
			{"q_norm_dir", 1, 9, 0, "shape 9 disagrees with the config (8 or 64)"},
			{"q_norm_mag", 1, 8, 0, "shape 8 is not one value"},
			{"gate_mult_col", 1, 176, 0, "shape 176 is not the column multiplier of a 176x64 matrix"},
			{"embed_mult", 1, 3, 0, "shape 3 fits no multiplier of a 64x100 matrix"},
		};
		int64_t shape[2];
		for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
			int rank = arch_role_shape(&cfg, want[i].role, shape);
			ok(rank == want[i].rank && (rank < 1 || shape[0] == want[i].a) &&
			   (rank < 2 || shape[1] == want[i].b), "%s: rank %d %lldx%lld", want[i].role,
			   rank, (long long)shape[0], (long long)shape[1]);
		}
		for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
			char msg[SW_NAME_MAX + 128];
			t = shaped(refused[i].role, 0, refused[i].rank, refused[i].a, refused[i].b);
			snprintf(msg, sizeof msg, "%s: %s", t.name, refused[i].msg);
			ok(arch_check_shape(&cfg, &t, &err) == SW_EDATA && !strcmp(err.msg, msg),
			   "%s refused: %s", refused[i].role, err.msg);
		}
		t = shaped("o", 0, 2, 64, 64);
		t.n_heads = 4;
		ok(arch_check_shape(&cfg, &t, &err) == SW_EDATA &&
		   strstr(err.msg, "n_heads 4 x head_dim 8 disagrees with its shape 64x64"),
		   "o's heads are its columns: 4 x 8 refused (%s)", err.msg);
		t = shaped("qkv", 0, 2, 5, 7);
		ok(arch_check_shape(&cfg, &t, &err) == SW_OK, "another family's role: its shape not checked");
		t = shaped("q_bias", 0, 1, 64, 0);
		ok(t.n_heads == 8 && t.head_dim == 8, "q_bias carries n_heads");
		t = shaped("v_bias", 0, 1, 16, 0);
		ok(t.n_heads == 2 && t.head_dim == 8, "v_bias carries n_kv_heads");
		t = shaped("o_in_norm", 0, 1, 64, 0);
		ok(t.n_heads == 0 && t.head_dim == 0, "o_in_norm, over all heads, carries none");
	}
	/* when a model has a role, how tensor parallelism splits it, which
	 * size its rows give */
	{
		const struct arch_role *r;
		int llama = 0, lookup = 0, rows = 0, cols = 0;
		for (size_t i = 0; (r = arch_role_at(i)); i++) {
			llama += r->when == ARCH_WHEN_ALWAYS || r->when == ARCH_WHEN_GAIN ||
				 r->when == ARCH_WHEN_UNTIED;
			lookup += r->shape.kind == ARCH_SHAPE_LOOKUP;
			rows += r->split == ARCH_SPLIT_ROWS;
			cols += r->split == ARCH_SPLIT_COLS;
		}
		ok(llama == 12, "twelve roles in every Llama (the head when untied): %d", llama);
		ok(lookup == 1 && arch_role_find("embed")->shape.kind == ARCH_SHAPE_LOOKUP,
		   "the embedding alone is a lookup table");
		ok(arch_role_find("lm_head")->when == ARCH_WHEN_UNTIED &&
		   arch_role_find("final_norm")->when == ARCH_WHEN_GAIN &&
		   arch_role_find("k_bias")->when == ARCH_WHEN_QKV_BIAS &&
		   arch_role_find("k_norm")->when == ARCH_WHEN_QK_NORM &&
		   arch_role_find("down_in_norm")->when == ARCH_WHEN_NORM_EVERYWHERE &&
		   arch_role_find("gate_norm")->when == ARCH_WHEN_DESIGN &&
		   arch_role_find("q_mult_col")->when == ARCH_WHEN_MULT &&
		   arch_role_find("q_gain_in_mag")->when == ARCH_WHEN_REPARAM &&
		   arch_role_find("up_bias")->when == ARCH_WHEN_OTHER &&
		   arch_role_find("router")->when == ARCH_WHEN_OTHER, "what brings each role");
		ok(rows == 6 && cols == 2 && arch_role_find("o")->split == ARCH_SPLIT_COLS &&
		   arch_role_find("down")->split == ARCH_SPLIT_COLS &&
		   arch_role_find("embed")->split == ARCH_SPLIT_EMBED &&
		   arch_role_find("attn_norm")->split == ARCH_SPLIT_NONE,
		   "q, k, v, gate, up, lm_head split by rows; o, down by columns (%d, %d)", rows, cols);
		ok(arch_role_find("q_norm")->place == ARCH_PLACE_QK &&
		   arch_role_find("v_norm_dir")->place == ARCH_PLACE_DNP &&
		   arch_role_find("o_in_norm")->place == ARCH_PLACE_IN &&
		   arch_role_find("lm_head_gain_in")->place == ARCH_PLACE_BEFORE &&
		   arch_role_find("k_gain_out_mag")->place == ARCH_PLACE_AFTER &&
		   arch_role_find("attn_norm")->place == ARCH_PLACE_PRE, "where each gain sits");
		bad = cfg;
		bad.vocab_size = bad.d_ff = 0;
		arch_size_from_rows(&bad, "up", 7);
		arch_size_from_rows(&bad, "lm_head", 9);
		ok(bad.vocab_size == 0 && bad.d_ff == 0, "up's and lm_head's rows give no size");
		arch_size_from_rows(&bad, "embed", 50);
		arch_size_from_rows(&bad, "gate", 96);
		arch_size_from_rows(&bad, "gate", 97);
		ok(bad.vocab_size == 50 && bad.d_ff == 96, "the embedding's rows give V, gate's F, once");
		ok(arch_dim_value(&cfg, ARCH_DIM_KVHD) == 16 && arch_dim_value(&cfg, ARCH_DIM_HHD) == 64 &&
		   arch_dim_value(&cfg, ARCH_DIM_NONE) == 0, "KV*hd 16, H*hd 64");
	}

	/* model order: numeric layers (10 after 9, not after 1), q before o */
	memset(list, 0, sizeof list);
	arch_info_for_role(&cfg, "lm_head", -1, &list[0]);
	arch_info_for_role(&cfg, "o", 10, &list[1]);
	arch_info_for_role(&cfg, "q", 10, &list[2]);
	arch_info_for_role(&cfg, "down", 9, &list[3]);
	arch_info_for_role(&cfg, "embed", -1, &list[4]);
	arch_info_for_role(&cfg, "final_norm", -1, &list[5]);
	qsort(list, 6, sizeof *list, arch_model_order_cmp);
	ok(!strcmp(list[0].role, "embed") && !strcmp(list[1].role, "down") && list[1].layer == 9 &&
	   !strcmp(list[2].role, "q") && !strcmp(list[3].role, "o") &&
	   !strcmp(list[4].role, "final_norm") && !strcmp(list[5].role, "lm_head"),
	   "model order: embed, layer 9, layer 10 (q, o), final norm, head");

	/* config checks */
	bad = cfg;
	bad.n_kv_heads = 3;
	ok(arch_config_check(&bad, &err) == SW_EDATA, "GQA needs n_heads %% n_kv_heads == 0");
	bad = cfg;
	bad.d_model = 0;
	ok(arch_config_check(&bad, &err) == SW_EDATA, "d_model 0 refused");
	bad = cfg;
	strcpy(bad.multipliers, "diag");
	ok(arch_config_check(&bad, &err) == SW_EDATA, "unknown multipliers refused");
	bad = cfg;
	bad.rope_theta = INFINITY;
	ok(arch_config_check(&bad, &err) == SW_EDATA && strstr(err.msg, "finite"),
	   "rope_theta = Inf refused (found by fuzz-h5ckpt)");
	for (int i = 0; i < 3; i++) {
		bad = cfg;
		bad.rope_theta = (double[]){0, 1, -5}[i];
		ok(arch_config_check(&bad, &err) == SW_EDATA && strstr(err.msg, "rope_theta = "),
		   "rope_theta = %g refused by name (a GGUF or params.json said so)", bad.rope_theta);
	}
	bad = cfg;
	bad.norm_eps = NAN;
	ok(arch_config_check(&bad, &err) == SW_EDATA, "norm_eps = NaN refused");
	ok(family_computed("qwen2") && family_computed("gpt2") && !family_computed("phi3"),
	   "the Llama family, GPT-2 and Gemma only");

	/* the families: the model's are family_computed's, every role a
	 * family names is one of arch.c's table, every pattern holds {L}
	 * or lies outside the layers, and a name matches one pattern */
	for (size_t i = 0; family_at(i); i++) {
		const struct arch_family *f = family_at(i);
		int roles_known = 1, one_match = 1;
		struct sw_config fc = cfg;
		snprintf(fc.arch, sizeof fc.arch, "%s", f->type);
		fc.n_layers = 0;
		for (size_t k = 0; k < f->n_names; k++) {
			const struct arch_role *r = arch_role_find(f->names[k].role);
			char name[SW_NAME_MAX], *at;
			snprintf(name, sizeof name, "%s", f->names[k].pattern);
			while ((at = strstr(name, "{L}")) || (at = strstr(name, "{E}")))
				memmove(at + 1, at + 3, strlen(at + 3) + 1), at[0] = '7';
			roles_known &= r && (r->in_layer == !!strstr(f->names[k].pattern, "{L}"));
			one_match &= family_tensor_info(&fc, name, &t) == 0 &&
				     !strcmp(t.role, f->names[k].role) &&
				     t.layer == (r && r->in_layer ? 7 : -1) &&
				     t.expert == (strstr(f->names[k].pattern, "{E}") ? 7 : -1);
		}
		/* the list the messages name: a type in it iff the model computes it */
		char listed[96];
		snprintf(listed, sizeof listed, ", %s,", FAMILY_COMPUTED_LIST);
		char item[48];
		snprintf(item, sizeof item, ", %s,", f->type);
		ok(family_computed(f->type) == !!f->model && !!strstr(listed, item) == !!f->model &&
		   family_find(f->hf_class) == f &&
		   (f->names ? f->n_names > 0 : f->model != 0), "family %s: model %d", f->type, f->model);
		ok(roles_known && one_match, "family %s: its roles are the table's, its names match", f->type);
	}
	{
		struct sw_config fc = cfg;
		snprintf(fc.arch, sizeof fc.arch, "mixtral");
		fc.n_layers = 2;
		ok(family_tensor_info(&fc, "model.layers.2.block_sparse_moe.gate.weight", &t) < 0,
		   "a family's layer past the config's refused");
		ok(family_tensor_info(&fc, "model.layers.1.block_sparse_moe.experts.x.w1.weight", &t) == 0 &&
		   !strcmp(t.role, "other") && t.layer == 1, "a name the family does not have: other, its layer kept");
		snprintf(fc.arch, sizeof fc.arch, "BloomForCausalLM");
		ok(family_tensor_info(&fc, "transformer.h.0.self_attention.query_key_value.weight", &t) == 0 &&
		   !strcmp(t.role, "other") && t.block == SW_BLOCK_OTHER && t.layer == -1,
		   "an unknown architecture: every tensor other");
		snprintf(fc.arch, sizeof fc.arch, "GPT2LMHeadModel");
		ok(family_tensor_layout(&fc, FAMILY_FROM_HF, "transformer.h.1.mlp.c_fc.weight") == FAMILY_TRANSPOSED &&
		   family_tensor_layout(&fc, FAMILY_FROM_HF, "transformer.wte.weight") == FAMILY_AS_STORED &&
		   family_tensor_layout(&cfg, FAMILY_FROM_HF, "model.layers.0.mlp.up_proj.weight") == FAMILY_AS_STORED,
		   "GPT-2's Conv1D weights are stored transposed, nothing else");
		ok(family_tensor_layout(&fc, FAMILY_FROM_NANOGPT, "transformer.h.1.mlp.c_fc.weight") ==
		   FAMILY_AS_STORED, "nanoGPT's nn.Linear weights, under GPT-2's names, are as stored");
		snprintf(fc.arch, sizeof fc.arch, "gemma2");
		ok(family_tensor_info(&fc, "model.layers.1.post_feedforward_layernorm.weight", &t) == 0 &&
		   !strcmp(t.role, "ffn_post_norm") && t.norm_type == SW_NORM_OUTPUT &&
		   family_gain_offset(&fc, FAMILY_FROM_HF, &t) == 1 &&
		   family_gain_offset(&fc, FAMILY_FROM_GGUF, &t) == 0,
		   "Gemma2's norms: their roles, a gain of 1 + weight from transformers, not from GGUF");
		ok(family_tensor_info(&fc, "model.layers.0.self_attn.q_proj.weight", &t) == 0 &&
		   family_gain_offset(&fc, FAMILY_FROM_HF, &t) == 0 &&
		   arch_info_from_hf_name(&cfg, "model.norm.weight", &t) == 0 &&
		   family_gain_offset(&cfg, FAMILY_FROM_HF, &t) == 0,
		   "no offset for a matrix, nor for Llama's norms");
	}

	/* the reparameterizations: per kind, their canonical form, their refusals */
	{
		static const struct {
			const char *spec, *canon;
			unsigned char attn, ffn, head;
		} good[] = {
			{"or", "or", 1, 1, 1}, {"er", "er", 2, 2, 2}, {"ffn=er,attn=or", "attn=or,ffn=er", 1, 2, 0},
			{"head=or", "head=or", 0, 0, 1}, {"attn=er,ffn=er,head=er", "er", 2, 2, 2},
		};
		static const char *const bad_specs[] = {"xr", "attn=xr", "mlp=or", "attn=or,attn=er",
							"attn=or,", "attn=or,er", "or,ffn=er"};
		unsigned char mode[3];
		char canon[32], why[64];
		for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
			ok(arch_scale_reparam_parse(good[i].spec, mode, canon, sizeof canon, why) == 0 &&
			   !strcmp(canon, good[i].canon) && mode[0] == good[i].attn && mode[1] == good[i].ffn &&
			   mode[2] == good[i].head, "--scale-reparam %s: %s", good[i].spec, good[i].canon);
		for (size_t i = 0; i < sizeof bad_specs / sizeof bad_specs[0]; i++)
			ok(arch_scale_reparam_parse(bad_specs[i], mode, canon, sizeof canon, why) < 0 && why[0],
			   "--scale-reparam %s refused: %s", bad_specs[i], why);
		ok(arch_gain_kind("v_norm") == ARCH_SV_ATTN && arch_gain_kind("o_in_norm") == ARCH_SV_ATTN &&
		   arch_gain_kind("up_gain_out") == ARCH_SV_FFN && arch_gain_kind("down_in_norm") == ARCH_SV_FFN &&
		   arch_gain_kind("lm_head_gain_in") == ARCH_SV_HEAD && arch_gain_kind("final_norm") == ARCH_SV_HEAD &&
		   arch_gain_kind("q") < 0 && arch_gain_kind("q_mult") < 0 && arch_gain_kind("attn_norm_dir") < 0,
		   "each gain's block kind; no kind for what is no gain");
		ok(arch_reparam_of("attn=or,head=er", "k_gain_in") == ARCH_REPARAM_OR &&
		   arch_reparam_of("attn=or,head=er", "gate_norm") == ARCH_REPARAM_NONE &&
		   arch_reparam_of("attn=or,head=er", "final_norm") == ARCH_REPARAM_ER &&
		   arch_reparam_of("", "attn_norm") == ARCH_REPARAM_NONE,
		   "a gain's reparameterization from the spec");
		bad = cfg;
		strcpy(bad.scale_reparam, "attn=zz");
		ok(arch_config_check(&bad, &err) == SW_EDATA && strstr(err.msg, "scale_reparam"),
		   "a checkpoint's unknown scale_reparam refused by name");
	}
	{
		/* Llama 3.1's own rope_scaling (head_dim 128, theta 500000) */
		struct sw_config r = cfg;
		int kept, divided, smoothed;
		double worst;
		float inv[64];
		r.head_dim = 128;
		r.rope_theta = 5e5;
		worst = rope_worst(&r, &kept, &divided, &smoothed);
		/* rounded once: within half an ulp, 2^-24 relative */
		ok(worst <= 0x1p-24 && kept == 64, "no scaling: 1/theta^(2i/hd) rounded once (%.3g)", worst);
		strcpy(r.rope_type, "default");
		ok(rope_worst(&r, &kept, &divided, &smoothed) <= 0x1p-24, "rope_type default: the same table");
		strcpy(r.rope_type, "linear");
		r.rope_factor = 4;
		worst = rope_worst(&r, &kept, &divided, &smoothed);
		ok(worst <= 1e-6 && divided == 64, "linear factor 4: inv / 4 (%.3g)", worst);
		/* Llama 3.1's; Llama 3.2's factor over a short original context */
		static const struct { const char *what; int64_t hd; double theta, factor; int64_t n; } l3[] = {
			{"Llama 3.1's", 128, 5e5, 8, 8192}, {"factor 32, a short context", 64, 1e4, 32, 64},
		};
		strcpy(r.rope_type, "llama3");
		r.rope_low_freq_factor = 1;
		r.rope_high_freq_factor = 4;
		for (size_t i = 0; i < sizeof l3 / sizeof l3[0]; i++) {
			r.head_dim = l3[i].hd;
			r.rope_theta = l3[i].theta;
			r.rope_factor = l3[i].factor;
			r.rope_original_max = l3[i].n;
			worst = rope_worst(&r, &kept, &divided, &smoothed);
			ok(worst <= 1e-6 && kept > 0 && divided > 0 && smoothed > 0,
			   "llama3, %s: %d kept, %d divided, %d smoothed, within %.3g", l3[i].what, kept,
			   divided, smoothed, worst);
		}
		ok(arch_config_check(&r, &err) == SW_OK && arch_model_check(&r, &err) == SW_OK,
		   "llama3 is a config the model computes");
		strcpy(r.rope_type, "yarn");
		ok(arch_rope_inv_freq(&r, inv) < 0, "yarn: no table");
		ok(arch_config_check(&r, &err) == SW_OK, "yarn: a config a listing reads");
		ok(arch_model_check(&r, &err) == SW_EDATA &&
		   !strcmp(err.msg, "rope_scaling type 'yarn' is not supported (default, linear and llama3 are)"),
		   "yarn: refused by name for a model: %s", err.msg);
		strcpy(r.rope_type, "llama3");
		r.rope_high_freq_factor = 1;
		ok(arch_config_check(&r, &err) == SW_OK && arch_model_check(&r, &err) == SW_EDATA &&
		   strstr(err.msg, "high_freq_factor"),
		   "llama3 with high_freq_factor <= low_freq_factor: read, refused for a model: %s", err.msg);
		r.rope_high_freq_factor = 4;
		r.rope_factor = 0;
		ok(arch_model_check(&r, &err) == SW_EDATA && strstr(err.msg, "factor = 0"),
		   "llama3 with factor 0 refused for a model: %s", err.msg);
		r.rope_factor = 8;
		r.rope_original_max = 0;
		ok(arch_model_check(&r, &err) == SW_EDATA && strstr(err.msg, "original_max_position_embeddings"),
		   "llama3 with no original context refused for a model: %s", err.msg);
	}
	{
		/* what a model refuses: named, 65 (SW_EDATA), never 64 */
		struct sw_config m = cfg;
		m.head_dim = 7;
		ok(arch_model_check(&m, &err) == SW_EDATA && strstr(err.msg, "head_dim 7 is odd"),
		   "odd head_dim: bad data: %s", err.msg);
		m = cfg;
		strcpy(m.hidden_act, "relu");
		ok(arch_config_check(&m, &err) == SW_OK && arch_model_check(&m, &err) == SW_EDATA &&
		   !strcmp(err.msg, "hidden_act 'relu' is not supported (silu, gelu_new, "
			   "gelu_pytorch_tanh or gelu are)"),
		   "hidden_act relu: read, refused for a model: %s", err.msg);
		for (int i = 0; i < 3; i++) {
			strcpy(m.hidden_act, (const char *[]){"gelu", "gelu_new", "gelu_pytorch_tanh"}[i]);
			ok(arch_model_check(&m, &err) == SW_OK, "hidden_act %s: computed", m.hidden_act);
		}
		m = cfg;
		m.attn_softcap = -1;
		ok(arch_model_check(&m, &err) == SW_EDATA && strstr(err.msg, "attn_logit_softcapping = -1"),
		   "a negative soft-cap refused by name: %s", err.msg);
		m = cfg;
		m.final_softcap = NAN;
		ok(arch_model_check(&m, &err) == SW_EDATA && strstr(err.msg, "final_logit_softcapping"),
		   "a NaN final soft-cap refused by name: %s", err.msg);
		m = cfg;
		m.query_pre_attn_scalar = INFINITY;
		ok(arch_model_check(&m, &err) == SW_EDATA && strstr(err.msg, "query_pre_attn_scalar"),
		   "an infinite query_pre_attn_scalar refused by name: %s", err.msg);
		m = cfg;
		strcpy(m.arch, "gpt2");
		m.seq_len = 0;
		ok(arch_model_check(&m, &err) == SW_EDATA && strstr(err.msg, "seq_len (n_positions)"),
		   "GPT-2 with no seq_len refused: %s", err.msg);
		m.seq_len = 16;
		strcpy(m.scale_design, "ffn=dnp");
		ok(arch_model_check(&m, &err) == SW_EDATA && strstr(err.msg, "ffn=dnp"),
		   "GPT-2 with ffn DNP refused: %s", err.msg);
		strcpy(m.scale_design, "attn=dnp");
		m.head_dim = 7;
		ok(arch_model_check(&m, &err) == SW_OK, "GPT-2: attn DNP and an odd head_dim (no RoPE)");
		strcpy(m.hidden_act, "swish");
		ok(arch_model_check(&m, &err) == SW_OK, "hidden_act swish: SiLU's other name");
		m = cfg;
		m.rope_partial = 0.5;
		ok(arch_config_check(&m, &err) == SW_OK && arch_model_check(&m, &err) == SW_EDATA &&
		   strstr(err.msg, "partial_rotary_factor 0.5"), "partial RoPE refused for a model: %s", err.msg);
		m.rope_partial = 1;
		ok(arch_model_check(&m, &err) == SW_OK, "partial_rotary_factor 1: all of RoPE");
		m = cfg;
		m.sliding_window = 64;
		ok(arch_window_check(&m, 64, &err) == SW_OK && arch_window_check(&cfg, 100000, &err) == SW_OK,
		   "a window no shorter than the sequences, or none: the same attention");
		ok(arch_window_check(&m, 65, &err) == SW_EDATA &&
		   strstr(err.msg, "sliding_window 64 is shorter than the sequences of 65 tokens"),
		   "a window shorter than the sequences refused: %s", err.msg);
		m.sliding_window = -1;
		ok(arch_model_check(&m, &err) == SW_EDATA && strstr(err.msg, "sliding_window"),
		   "a negative window refused for a model: %s", err.msg);
	}
	return tap_done();
}
