/*
 * Unit tests of lib/formats/hfdir.c, a Hugging Face model directory's rules: the
 * small JSON files read whole (bounded, regular files only, a FIFO never
 * waited on), config.json beside the checkpoint, the shard index (its
 * shards once each in order of first appearance, every tensor held listed
 * for its shard), shard paths, and the symlink rule.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../lib/formats/hfdir.h"
#include "tap.h"

static char dir[] = "/tmp/sw-t-hfdir.XXXXXX", away[] = "/tmp/sw-t-hfdir-away.XXXXXX";

static const char *at(const char *name)
{
	static char p[4][PATH_MAX];
	static int k;

	k = (k + 1) % 4;
	snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
	return p[k];
}

static void put(const char *name, const char *text)
{
	FILE *f = fopen(at(name), "w");

	if (!f || fputs(text, f) < 0 || fclose(f))
		abort();
}

static int sniff(const char *name)
{
	struct stat st;
	int fd = open(at(name), O_RDONLY), yes;

	if (fd < 0 || fstat(fd, &st) < 0)
		abort();
	yes = hfdir_sniff_index(fd, (uint64_t)st.st_size);
	close(fd);
	return yes;
}

static const char config[] =
	"{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"vocab_size\": 48,"
	" \"hidden_size\": 16, \"intermediate_size\": 40, \"num_hidden_layers\": 2,"
	" \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 4,"
	" \"max_position_embeddings\": 32, \"rms_norm_eps\": 1e-05, \"tie_word_embeddings\": false}";

int main(void)
{
	struct hfdir_index ix;
	struct sw_config c;
	struct sw_err err;
	char *buf, path[64], sub[PATH_MAX], out[PATH_MAX + 16];
	size_t len, k;
	int rc;

	if (!mkdtemp(dir) || !mkdtemp(away))
		return 1;

	/* small files */
	put("small.json", "{\"a\": 1}\n");
	ok(hfdir_read_small(at("small.json"), 64, &buf, &len, &err) == SW_OK && len == 9 &&
	   !strcmp(buf, "{\"a\": 1}\n"), "a small file read whole, a NUL after it");
	free(buf);
	ok(hfdir_read_small(at("small.json"), 8, &buf, &len, &err) == SW_EDATA && !buf &&
	   strstr(err.msg, "small.json: larger than 8 bytes"), "a larger one refused: %s", err.msg);
	ok(hfdir_read_small(at("none.json"), 64, &buf, &len, &err) == SW_ENOINPUT && !buf &&
	   strstr(err.msg, "none.json: "), "a missing one: %s", err.msg);
	if (mkfifo(at("fifo.json"), 0600) == 0)
		ok(hfdir_read_small(at("fifo.json"), 64, &buf, &len, &err) == SW_ENOINPUT &&
		   strstr(err.msg, "fifo.json: not a regular file"), "a FIFO refused, not waited on: %s",
		   err.msg);
	mkdir(at("adir"), 0700);
	ok(hfdir_read_small(at("adir"), 64, &buf, &len, &err) == SW_ENOINPUT &&
	   strstr(err.msg, "not a regular file"), "a directory refused: %s", err.msg);

	/* what an index looks like */
	put("ix1", " \r\n\t{\"weight_map\": {}}");
	put("ix2", "\xef\xbb\xbf{}");
	put("ix3", "[1]");
	put("ix4", "");
	ok(sniff("ix1") && !sniff("ix2") && !sniff("ix3") && !sniff("ix4"),
	   "an index: JSON blanks then '{' (no byte order mark, no array, not empty)");

	/* config.json */
	ok(hfdir_config(dir, &c, &err) == SW_ENOINPUT &&
	   !strcmp(err.msg, "no config.json beside it (needed for the architecture)"),
	   "no config.json: %s", err.msg);
	put("config.json", config);
	ok(hfdir_config(dir, &c, &err) == SW_OK && c.d_model == 16 && c.n_layers == 2 &&
	   c.n_heads == 4 && c.head_dim == 4, "config.json read: the architecture");
	put("config.json", "{\"a\":");
	ok(hfdir_config(dir, &c, &err) == SW_EDATA && strstr(err.msg, "config.json"),
	   "a broken config.json refused: %s", err.msg);

	/* the index: shards once each, in order of first appearance */
	put("index.json", "{\"metadata\": {}, \"weight_map\": {\"z\": \"s-2\", \"a\": \"s-1\", "
	    "\"m\": \"s-2\", \"b\": \"s-3\", \"c\": \"s-1\"}}");
	rc = hfdir_index_open(at("index.json"), &ix, &err);
	ok(rc == SW_OK && ix.nshards == 3 && !strcmp(ix.shard[0], "s-2") &&
	   !strcmp(ix.shard[1], "s-1") && !strcmp(ix.shard[2], "s-3"),
	   "three shards, once each, in order of first appearance");
	ok(rc == SW_OK && ix.idx.n == 5 && !strcmp(ix.idx.e[0].name, "a") &&
	   !strcmp(ix.idx.e[4].name, "z"), "the entries sorted by name");
	ok(rc == SW_OK && hfdir_index_holds(&ix, "s-2", "D/s-2", "m", &k, &err) == SW_OK &&
	   !strcmp(ix.idx.e[k].name, "m"), "a tensor listed for its shard, its entry found");
	ok(rc == SW_OK && hfdir_index_holds(&ix, "s-1", "D/s-1", "m", NULL, &err) == SW_EDATA &&
	   !strcmp(err.msg, "D/s-1 holds m, which the index does not list there"),
	   "one listed for another shard: %s", err.msg);
	ok(rc == SW_OK && hfdir_index_holds(&ix, "s-1", "D/s-1", "q", NULL, &err) == SW_EDATA &&
	   !strcmp(err.msg, "D/s-1 holds q, which the index does not list there"),
	   "one not listed: %s", err.msg);
	hfdir_index_free(&ix);
	ok(!ix.shard && !ix.idx.e && !ix.nshards, "freed, zeroed");
	put("index.json", "{\"weight_map\": {}}");
	ok(hfdir_index_open(at("index.json"), &ix, &err) == SW_OK && ix.idx.n == 0 && !ix.nshards &&
	   hfdir_index_holds(&ix, "s", "D/s", "a", NULL, &err) == SW_EDATA, "an empty weight_map");
	hfdir_index_free(&ix);
	put("index.json", "{\"weight_map\": {\"a\": \"../s\"}}");
	ok(hfdir_index_open(at("index.json"), &ix, &err) == SW_EDATA && !ix.shard && !ix.idx.e &&
	   strstr(err.msg, "not a plain shard file name"), "a shard path refused: %s", err.msg);
	ok(hfdir_index_open(at("gone.json"), &ix, &err) == SW_ENOINPUT && !ix.shard,
	   "no index: %s", err.msg);

	/* shard paths */
	ok(hfdir_shard_path(path, sizeof path, "a/b", "s.bin") == 0 && !strcmp(path, "a/b/s.bin"),
	   "a shard's path: DIR/NAME");
	ok(hfdir_shard_path(path, 9, "a/b", "s.bin") < 0 && hfdir_shard_path(path, 10, "a/b", "s.bin") == 0,
	   "one that does not fit is said");

	/* links */
	put("plain", "x");
	mkdir(at("blobs"), 0700);
	put("blobs/b1", "x");
	snprintf(out, sizeof out, "%s/file", away);
	if (close(open(out, O_WRONLY | O_CREAT, 0600)))
		abort();
	ok(symlink("blobs/b1", at("in")) == 0 && symlink(out, at("out")) == 0 &&
	   symlink("/nonexistent/sw-t-hfdir", at("dangling")) == 0, "setup: links");
	ok(hfdir_check_link(at("plain"), dir, at("index.json"), &err) == SW_OK, "a plain file");
	ok(hfdir_check_link(at("in"), dir, at("index.json"), &err) == SW_OK,
	   "a link inside the index's directory");
	ok(hfdir_check_link(at("dangling"), dir, at("index.json"), &err) == SW_OK,
	   "a dangling link (opening it says why)");
	ok(hfdir_check_link(at("out"), dir, at("index.json"), &err) == SW_EDATA &&
	   strstr(err.msg, "/out: a symlink to ") && strstr(err.msg, "outside the index's directory"),
	   "a link out of it refused: %s", err.msg);
	/* the Hugging Face cache: snapshots/REV/ links into blobs/, the
	 * index too; a shard linking there is the index's own directory */
	mkdir(at("snap"), 0700);
	snprintf(sub, sizeof sub, "%s/snap", dir);
	put("blobs/index", "{}");
	ok(symlink("../blobs/index", at("snap/index.json")) == 0 &&
	   symlink("../blobs/b1", at("snap/s1")) == 0, "setup: a cache snapshot");
	ok(hfdir_check_link(at("snap/s1"), sub, at("snap/index.json"), &err) == SW_OK,
	   "a shard linking where the index links (the cache's blobs)");
	ok(hfdir_check_link(at("snap/s1"), sub, out, &err) == SW_EDATA,
	   "the same link, the index elsewhere: refused");

	snprintf(sub, sizeof sub, "rm -rf %s %s", dir, away);
	if (system(sub))
		diag("could not remove %s, %s", dir, away);
	return tap_done();
}
