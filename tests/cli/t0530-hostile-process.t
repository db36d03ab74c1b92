#!/bin/sh
# Hostile processes: this script extends the bad-input table
# (tests/cli/t0500-bad-input.t) with what the table cannot do in one command:
# standard descriptors closed or a directory, an input that shrinks while
# a tool has it mapped, a tool killed while it writes a directory, a
# tokenizer whose tokens expand to gigabytes, values out of float32's
# range. Each case checks the one-line message, the exit status, an empty
# stdout (a header at most) and that no temporary file is left.
. "$(dirname "$0")/../lib/tap.sh"

# no temporary FILE.tmp.* here
no_temp() {
	for f in "$1".tmp.*; do
		if [ -e "$f" ]; then echo "$f exists"; return 1; fi
	done
}

# ---- fds 0-2 closed or not what they should be -------------------------

test_expect_success 'setup: a tokenizer, tokens, a table' '
	printf "abababab cdcd\n" >small.txt &&
	sw-tokenize train --vocab 300 -o tok.bpe "$FIX/corpus.txt" >/dev/null &&
	sw-tokenize encode -t tok.bpe -o corpus.llmc "$FIX/corpus.txt" >/dev/null &&
	sw-norms --role lm_head "$FIX/tiny.h5" >norms.tsv
'

# the note "stopped at a vocabulary of 259" went into the temporary file,
# which had taken fd 2
test_expect_success 'stderr closed: sw-tokenize train writes the tokenizer, not its note, into it' '
	sw-tokenize train --vocab 1000 -o with.bpe small.txt >out 2>err &&
	grep -q "stopped at a vocabulary of 259" err &&
	sw-tokenize train --vocab 1000 -o closed.bpe small.txt >out2 2>&- &&
	test_cmp with.bpe closed.bpe && no_temp closed.bpe
'

# with stdout closed, a tool whose output is a file succeeds; one whose
# output is stdout fails as it always did, and says so
test_expect_success 'stdout closed: sw-convert writes its directory, exit 0' '
	sw-convert "$FIX/tiny.h5" open-hf >out &&
	sw-convert "$FIX/tiny.h5" closed-hf >&- 2>err &&
	test_line_count = 0 err &&
	cmp open-hf/model.safetensors closed-hf/model.safetensors &&
	cmp open-hf/config.json closed-hf/config.json &&
	sw-convert closed-hf back.h5 >&- 2>err && test_line_count = 0 err &&
	# exact: the same binary on the same float32 values, converted losslessly
	sw-norms back.h5 >got && sw-norms "$FIX/tiny.h5" >ref && sed "s|$FIX/tiny.h5|back.h5|" ref >expect &&
	test_cmp expect got
'

test_expect_success 'stdout closed: sw-tokenize decode -o writes the text, exit 0' '
	sw-tokenize decode -t tok.bpe -o text corpus.llmc >&- 2>err &&
	test_line_count = 0 err && cmp text "$FIX/corpus.txt" && no_temp text
'

if command -v gnuplot >/dev/null 2>&1; then
	test_expect_success 'stdout closed: sw-plot writes the figure, exit 0' '
		sw-plot norms norms.tsv -o fig.svg >&- 2>err &&
		test_line_count = 0 err && grep -q "<svg" fig.svg && no_temp fig.svg
	'
else
	test_skip 'stdout closed: sw-plot writes the figure, exit 0' 'gnuplot not installed'
fi

test_expect_success 'stdout closed: a table that cannot be printed is exit 74' '
	test_expect_code 74 sw-norms "$FIX/tiny.h5" >&- 2>err &&
	test_one_error sw-norms "write error" && grep -q "Bad file descriptor$" err
'

test_expect_success 'stdin closed: the file names cannot be read, exit 74' '
	test_expect_code 74 sw-norms <&- >out 2>err &&
	test_one_error sw-norms stdin && grep -q "cannot read: Bad file descriptor" err &&
	test_line_count -le 1 out
'

test_expect_success 'stdin a directory: an error, not an empty table (exit 66)' '
	for tool in sw-ls sw-norms sw-spectrum sw-sharpness sw-qkdrift sw-transfer; do
		test_expect_code 66 $tool <"$FIX" >out 2>err &&
		test_one_error $tool stdin && grep -q "cannot read: Is a directory" err &&
		test_line_count -le 1 out || exit 1
	done
'

# ---- values at the edges of float32, and what is said about them ---------

# mkst.py DIR DTYPE HEAD GAIN: a safetensors checkpoint of an 8 x 4 output
# head (the 32 values HEAD, little-endian DTYPE 'f' or 'd') and, unless
# GAIN is '-', the final norm's gain (4 float32 values)
cat >mkst.py <<'PY'
import json, os, struct, sys
d, dtype, head, gain = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
os.makedirs(d)
json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 8,
           "hidden_size": 4, "num_hidden_layers": 1, "num_attention_heads": 1,
           "num_key_value_heads": 1, "intermediate_size": 8, "tie_word_embeddings": False},
          open(d + "/config.json", "w"))
w = [float(x) for x in head.split(",")] * (32 // len(head.split(",")))
data = struct.pack("<32" + dtype, *w)
hdr = {"lm_head.weight": {"dtype": "F64" if dtype == "d" else "F32", "shape": [8, 4],
                          "data_offsets": [0, len(data)]}}
if gain != "-":
    g = struct.pack("<4f", *[float(x) for x in gain.split(",")])
    hdr["model.norm.weight"] = {"dtype": "F32", "shape": [4], "data_offsets": [len(data), len(data) + 16]}
    data += g
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open(d + "/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + data)
PY

# every entry 3e38 (as float32, c), gain g: W diag(g) is c 1 g^T, of rank 1,
# so each norm is known: rms_to_inf = rms_to_rms = sqrt(4) c |g|, one_to_rms
# = max_abs = c max g, spectral = frobenius = sqrt(8) c |g|, rms = c |g| / 2
test_expect_success 'the folded head of weights near 3e38: finite norms, right (was "0 of 32 values are NaN or Inf")' '
	"$PY" mkst.py huge f 3e38 2,2,0.5,1 &&
	sw-norms --role lm_head huge >out 2>err &&
	test_line_count = 0 err && cut -f6,10-16 out >got &&
	"$PY" -c "
import math, struct
c = struct.unpack(\"<f\", struct.pack(\"<f\", 3e38))[0]
print(\"role\trms_to_inf\trms_to_rms\tone_to_rms\tspectral\tfrobenius\trms\tmax_abs\")
for role, g in ((\"lm_head\", [1, 1, 1, 1]), (\"lm_head_folded\", [2, 2, 0.5, 1])):
    n = math.sqrt(sum(x * x for x in g))
    print(\"\t\".join([role] + [\"%.17g\" % v for v in (2 * c * n, 2 * c * n, c * max(g),
          math.sqrt(8) * c * n, math.sqrt(8) * c * n, c * n / 2, c * max(g))]))" >expect &&
	# 32 exact float32 values whose squares and sums are taken in double
	# (they would overflow float32): ~1e-16 each, 1e-8 relative in all
	numbers_close 1e-8 expect got
'

test_expect_success 'a NaN in the final norm gain is named as such, the raw head still printed' '
	"$PY" mkst.py nangain f 0.5 1,nan,1,1 &&
	test_expect_code 65 sw-norms --role lm_head nangain >out 2>err &&
	test_one_error sw-norms nangain &&
	grep -q "lm_head.weight: 1 of the 4 column scales folded in (the final norm.s gain) are NaN or Inf$" err &&
	test_line_count = 2 out && cut -f6 out | tail -n 1 | grep -qx lm_head
'

test_expect_success 'setup: F64 values beyond float32 range' '
	"$PY" mkst.py big64 d 0.5,-0.25,1e300,2 -
'

for tool in sw-norms sw-spectrum; do
	test_expect_success "$tool: F64 values beyond float32's range: exit 65, the value named" "
		test_expect_code 65 $tool big64 >out 2>err &&
		test_one_error $tool big64 &&
		grep -q 'lm_head.weight: value 1e+300 at index 2 is beyond float32.s range' err &&
		test_line_count -le 1 out
	"
done

test_expect_success 'sw-convert: F64 values beyond float32 range: exit 65, nothing written' '
	test_expect_code 65 sw-convert big64 big64.h5 >out 2>err &&
	test_one_error sw-convert big64/model.safetensors &&
	grep -q "lm_head.weight: value 1e+300 at index 2 is beyond float32.s range" err &&
	test_line_count = 0 out && ! ls big64.h5* 2>/dev/null
'

test_expect_success 'F64 values float32 would make 0: exit 65, not norms of 0' '
	"$PY" mkst.py tiny64 d 1e-300 - &&
	test_expect_code 65 sw-norms tiny64 >out 2>err &&
	test_one_error sw-norms tiny64 &&
	grep -q "lm_head.weight: value 1e-300 at index 0 is below float32.s normal range (smallest 1.17549435e-38), in which the tools compute: it would become 0$" err &&
	test_line_count -le 1 out
'

test_expect_success 'F64 values float32 holds: the same norms as the float32 checkpoint' '
	"$PY" mkst.py ok64 d 0.5,-0.25,3,2 - && "$PY" mkst.py ok32 f 0.5,-0.25,3,2 - &&
	sw-norms ok64 >got64 && sw-norms ok32 >got32 &&
	# exact: the same binary on the same values (each F64 one is a float32)
	cut -f2- got64 >a && cut -f2- got32 >b && test_cmp b a
'

# ---- a memory bomb: tokens that expand to 2^26 bytes each ----------------

# 26 doubling merges: token 256 is "ab", 256 + k is token 255 + k twice, so
# token 281 is "ab" 2^25 times (64 MiB) and 280 half that. A 1034-byte
# token file of 281, "\n", 280, "c" decodes to 96 MiB.
test_expect_success 'setup: the doubling tokenizer, its tokens, the expected digest' '
	"$PY" -c "
import hashlib, struct
merges = [\"256 97 98\"] + [\"%d %d %d\" % (256 + k, 255 + k, 255 + k) for k in range(1, 26)]
open(\"bomb.bpe\", \"w\").write(\"scalewatch-bpe 1\npretokenizer words\nvocab 282\nmerges 26\n\"
                               + \"\n\".join(merges) + \"\n\")
ids = [281, 10, 280, 99]
open(\"bomb.llmc\", \"wb\").write(struct.pack(\"<256i\", 20240520, 1, len(ids), *[0] * 253)
                                + struct.pack(\"<4H\", *ids))
h = hashlib.md5()
for part in (b\"ab\" * 2**25, b\"\n\", b\"ab\" * 2**24, b\"c\"):
    h.update(part)
print(2**26 + 1 + 2**25 + 1, h.hexdigest())" >expect &&
	"$PY" -c "
import struct
raw = open(\"corpus.llmc\", \"rb\").read()
n = struct.unpack(\"<3i\", raw[:12])[2]
open(\"corpus3.llmc\", \"wb\").write(struct.pack(\"<256i\", 20240520, 1, 3 * n, *[0] * 253) + raw[1024:] * 3)"
'

# the virtual memory of CMD once it is blocked writing to a full pipe: what
# any decode needs (OpenBLAS reserves its buffers at start), in kB. (Under
# ASan the heap is inside what it reserved at start, so there the limit
# checks only that the output is right.)
vm_blocked() {
	"$PY" - "$@" <<-\PY
	import subprocess, sys, time
	p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)
	for _ in range(3000):
	    try:
	        if "pipe" in open("/proc/%d/wchan" % p.pid).read():
	            break
	    except OSError:
	        pass
	    time.sleep(0.01)
	vm = [l.split()[1] for l in open("/proc/%d/status" % p.pid) if l.startswith("VmPeak:")][0]
	while p.stdout.read(1 << 16):
	    pass
	sys.exit(1 if p.wait() else print(vm))
	PY
}

test_expect_success 'decode: 96 MiB of text from 1034 bytes, right, in the memory of any decode' '
	export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 &&
	base=$(vm_blocked sw-tokenize decode -t tok.bpe corpus3.llmc) &&
	limit=$((base + 65536)) && echo "VmPeak of a small decode $base kB, limit $limit kB" &&
	mkfifo text.fifo &&
	{ "$PY" -c "
import hashlib, sys
h, n = hashlib.md5(), 0
with open(sys.argv[1], \"rb\") as f:
    for chunk in iter(lambda: f.read(1 << 20), b\"\"):
        h.update(chunk)
        n += len(chunk)
print(n, h.hexdigest())" text.fifo >got & } &&
	reader=$! &&
	{ (ulimit -v $limit && exec sw-tokenize decode -t bomb.bpe bomb.llmc) >text.fifo 2>err; st=$?; } ;
	wait $reader && test $st = 0 && test_line_count = 0 err && test_cmp expect got
'

# limited KB CMD...: CMD with its address space bounded to KB kilobytes
limited() {
	(ulimit -v "$1" && shift && exec "$@")
}

# (under ASan the heap lives in memory reserved at start: ulimit -v bounds
# nothing, and a failed allocation aborts instead of returning NULL)
if [ -n "${SW_SANITIZED:-}" ]; then
	test_skip 'sw-train: out of memory for the model names its size' 'ASan: no out-of-memory to provoke'
else
	test_expect_success 'sw-train: out of memory for the model names its size (was "for 0 parameters")' '
		export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 &&
		base=$(vm_blocked sw-tokenize decode -t tok.bpe corpus3.llmc) &&
		params=$((2 * 256 * 1024 + 1024 + 8 * (4 * 1024 * 1024 + 3 * 1024 * 2728 + 2 * 1024))) &&
		test_expect_code 70 limited $((base + 262144)) sw-train --data "$FIX/corpus.txt" --vocab 256 \
			--d-model 1024 --d-ff 2728 --n-layers 8 --out oom --steps 1 >out 2>err &&
		test_line_count = 1 err &&
		grep -q "^sw-train: out of memory for $params parameters (0.809 GB for them and their gradients)$" err &&
		test_line_count = 0 out && ! test -e oom
	'
fi

# ---- inputs that shrink while a tool has them mapped ---------------------

# race.pl FILE BYTES AFTER CMD ARGS...: run CMD; once it has FILE mapped
# (FILE's path in /proc/PID/maps) and AFTER exists ('-': at once), stop it,
# cut FILE to BYTES while the mapping is still there, let it go on; exit
# with CMD's status (128 + the signal that killed it). 200: CMD ended, or
# had unmapped FILE, before the cut: the race was lost, try again.
cat >race.pl <<'PERL'
use strict;
use warnings;
use Cwd qw(abs_path);
use POSIX qw(:sys_wait_h);
use Time::HiRes qw(usleep);

my ($file, $bytes, $after, @cmd) = @ARGV;
my $path = abs_path($file);
my $pid = fork() // die "fork: $!";
if ($pid == 0) {
	exec @cmd or die "exec $cmd[0]: $!";
}
sub mapped {
	open(my $m, '<', "/proc/$pid/maps") or return 0;
	while (<$m>) { return 1 if /\s\Q$path\E$/ }
	return 0;
}
sub status { my $st = shift; WIFSIGNALED($st) ? 128 + WTERMSIG($st) : WEXITSTATUS($st) }
my $polls = 0;
until (mapped() && ($after eq '-' || -e $after)) {
	exit 200 if waitpid($pid, WNOHANG) == $pid;
	usleep(500);
	if (++$polls > 240000) { kill 'KILL', $pid; waitpid($pid, 0); die "race.pl: $cmd[0] hangs\n" }
}
kill 'STOP', $pid;
my $still = mapped();
if ($still) { truncate($path, $bytes) or die "race.pl: truncate: $!\n" }
kill 'CONT', $pid;
waitpid($pid, 0);
exit($still ? status($?) : 200);
PERL

# shrink_run INPUT BYTES AFTER CMD...: race.pl on INPUT, a fresh copy of
# INPUT.orig, again until the race is won (5 tries at most); stdout in
# out, stderr in err, the status in $st
shrink_run() {
	input=$1 bytes=$2 after=$3
	shift 3
	for try in 1 2 3 4 5; do
		rm -rf "$input" && cp "$input.orig" "$input" &&
		perl "$TRASH/race.pl" "$input" "$bytes" "$after" "$@" >out 2>err
		st=$?
		[ $st != 200 ] && return 0
		echo "race lost (try $try): $* ended before $input was cut"
	done
	return 1
}

# one 16384 x 1024 matrix (64 MiB): long enough to read that the cut comes
# while it is mapped
test_expect_success 'setup: a 64 MiB checkpoint of one matrix, as safetensors and HDF5' '
	cat >mkbig.py <<-\PY &&
	import array, json, struct, sys
	# the output head, x_ij = ((7i + 13j) % 101 - 50) / 50, and a config.json
	V, D = int(sys.argv[1]), int(sys.argv[2])
	json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V,
	           "hidden_size": D, "num_hidden_layers": 1, "num_attention_heads": 4,
	           "num_key_value_heads": 4, "intermediate_size": 64, "tie_word_embeddings": False},
	          open("config.json", "w"))
	n = V * D * 4
	h = json.dumps({"lm_head.weight": {"dtype": "F32", "shape": [V, D], "data_offsets": [0, n]}}).encode()
	h += b" " * (-len(h) % 8)
	rows = [array.array("f", [((r + 13 * j) % 101 - 50) / 50.0 for j in range(D)]).tobytes()
	        for r in range(101)]
	with open("big.safetensors.orig", "wb") as f:
	    f.write(struct.pack("<Q", len(h)) + h)
	    for i in range(V):
	        f.write(rows[7 * i % 101])
	PY
	"$PY" mkbig.py 16384 1024 && cp big.safetensors.orig big.safetensors &&
	sw-convert big.safetensors big.h5.orig && rm big.safetensors
'

for tool in "sw-spectrum --summary" sw-norms; do
	test_expect_success "$tool: the matrix cut while mapped: exit 74, no row" "
		shrink_run big.safetensors 4096 - $tool big.safetensors &&
		test \$st = 74 && test_one_error ${tool%% *} big.safetensors &&
		grep -q 'lm_head.weight: the file shrank while it was read\$' err &&
		test_line_count -le 1 out
	"
done

# GPT-2's Conv1D weight is read stored [in, out] and handed up transposed
# (a copy): the cut while the stored tensor is mapped is seen all the same
test_expect_success 'sw-norms: a transposed GPT-2 weight cut while mapped: exit 74, no row' '
	mkdir gpt2big && cd gpt2big &&
	cat >mk.py <<-\PY &&
	import array, json, struct
	I, O = 16384, 1024
	json.dump({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 64,
	           "n_embd": I, "n_inner": O, "n_layer": 1, "n_head": 4}, open("config.json", "w"))
	name = "transformer.h.0.mlp.c_fc.weight"
	n = I * O * 4
	h = json.dumps({name: {"dtype": "F32", "shape": [I, O], "data_offsets": [0, n]}}).encode()
	h += b" " * (-len(h) % 8)
	row = array.array("f", [((13 * j) % 101 - 50) / 50.0 for j in range(O)]).tobytes()
	with open("g.safetensors.orig", "wb") as f:
	    f.write(struct.pack("<Q", len(h)) + h)
	    for i in range(I):
	        f.write(row)
	PY
	"$PY" mk.py &&
	shrink_run g.safetensors 4096 - sw-norms g.safetensors &&
	test $st = 74 && test_one_error sw-norms g.safetensors &&
	grep -q "transformer.h.0.mlp.c_fc.weight: the file shrank while it was read" err &&
	test_line_count -le 1 out
'

# a part of a fused tensor (Phi-3's qkv_proj: q, k, v by rows) is read
# from the whole stored tensor, mapped, and copied out: the cut while it
# is mapped is seen all the same
test_expect_success 'sw-norms: a fused Phi-3 qkv_proj cut while mapped: exit 74, no row' '
	mkdir phi3big && cd phi3big &&
	cat >mk.py <<-\PY &&
	import array, json, struct
	D, H = 2048, 16
	json.dump({"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "vocab_size": 64,
	           "hidden_size": D, "num_hidden_layers": 1, "num_attention_heads": H,
	           "num_key_value_heads": H, "intermediate_size": 64}, open("config.json", "w"))
	name = "model.layers.0.self_attn.qkv_proj.weight"
	n = 3 * D * D * 4
	h = json.dumps({name: {"dtype": "F32", "shape": [3 * D, D], "data_offsets": [0, n]}}).encode()
	h += b" " * (-len(h) % 8)
	row = array.array("f", [((13 * j) % 101 - 50) / 50.0 for j in range(D)]).tobytes()
	with open("p.safetensors.orig", "wb") as f:
	    f.write(struct.pack("<Q", len(h)) + h)
	    for i in range(3 * D):
	        f.write(row)
	PY
	"$PY" mk.py &&
	cp p.safetensors.orig p.safetensors && sw-ls p.safetensors >ls &&
	grep -q "qkv_proj.weight:v	vo	v	0	matrix	F32	2048x2048" ls &&
	shrink_run p.safetensors 4096 - sw-norms p.safetensors &&
	test $st = 74 && test_one_error sw-norms p.safetensors &&
	grep -q "model.layers.0.self_attn.qkv_proj.weight: the file shrank while it was read" err &&
	test_line_count -le 1 out
'

test_expect_success 'sw-convert --dtype bf16: the HDF5 input cut while mapped: exit 74, nothing left' '
	shrink_run big.h5 4096 - sw-convert --dtype bf16 big.h5 export &&
	test $st = 74 && test_one_error sw-convert big.h5 &&
	grep -q "lm_head.weight: the file shrank while it was read$" err &&
	test_line_count = 0 out && ! ls -d export* 2>/dev/null
'

test_expect_success 'sw-train: the token file cut while training: exit 74, no checkpoint' '
	"$PY" -c "
import struct
n = 400000
open(\"tokens.llmc.orig\", \"wb\").write(struct.pack(\"<256i\", 20240520, 1, n, *[0] * 253)
    + struct.pack(\"<1000H\", *[(7 * i) % 250 for i in range(1000)]) * (n // 1000))" &&
	shrink_run tokens.llmc 1024 run/trace.h5 sw-train --data tokens.llmc --out run --steps 1000000 \
		--d-model 16 --n-layers 1 --seq-len 16 --batch 2 --eval-every 0 --ckpt-every 0 &&
	test $st = 74 && test_one_error sw-train tokens.llmc &&
	grep -q "the file shrank while it was read$" err && test_line_count = 0 out &&
	test -z "$(ls run | grep -v "^trace.h5$")"
'

# ---- killed while writing a directory ------------------------------------

# killrace.pl DIR N SIG CMD ARGS...: run CMD; once the directory matching
# the glob DIR holds N files or more, stop it, send SIG, let it go on;
# exit with its status (128 + the signal). 200: CMD ended first.
cat >killrace.pl <<'PERL'
use strict;
use warnings;
use POSIX qw(:sys_wait_h);
use Time::HiRes qw(usleep);

my ($glob, $n, $sig, @cmd) = @ARGV;
my $pid = fork() // die "fork: $!";
if ($pid == 0) {
	exec @cmd or die "exec $cmd[0]: $!";
}
sub files { my @d = glob($glob); return @d ? scalar(my @f = glob("$d[0]/*")) : 0 }
my $polls = 0;
until (files() >= $n) {
	exit 200 if waitpid($pid, WNOHANG) == $pid;
	usleep(200);
	if (++$polls > 600000) { kill 'KILL', $pid; waitpid($pid, 0); die "killrace.pl: $cmd[0] hangs\n" }
}
kill 'STOP', $pid;
my $have = files();
print STDERR "killrace.pl: $have files when killed\n";
kill $sig, $pid;
kill 'CONT', $pid;
waitpid($pid, 0);
exit(WIFSIGNALED($?) ? 128 + WTERMSIG($?) : WEXITSTATUS($?));
PERL

# more files than the 64 names the cleanup once remembered
test_expect_success 'SIGTERM while sw-convert --shard-size 1 writes 111 shards: nothing left' '
	for try in 1 2 3 4 5; do
		perl killrace.pl "export.tmp.*" 70 TERM sw-convert --shard-size 1 "$FIX/tiny.h5" export >out 2>err
		st=$?
		[ $st != 200 ] && break
		echo "race lost (try $try)"
	done &&
	test $st = 143 && grep -q "^killrace.pl: [0-9]* files when killed$" err &&
	test "$(sed -n "s/^killrace.pl: \([0-9]*\) files.*/\1/p" err)" -ge 70 &&
	test_line_count = 0 out && ! ls -d export* 2>/dev/null
'

test_done
