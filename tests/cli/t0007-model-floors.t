#!/bin/sh
# lib/model/'s floors, lowest first (model.h's comment): the CPU's
# kernels (cpukern), the model's types (model.h), the parameter layout
# (layout), the step (step), the CPU as the step's back end (model.c,
# modelint.h), the R-operator (modelhvp). A file of a floor includes of
# lib/model/ only files of its own floor or lower ones; t0002 checks the
# layers between lib/'s folders, this the floors inside the model's.
. "$(dirname "$0")/../lib/tap.sh"

# floor FILE: the number of FILE's floor, empty for a file of none
floor() {
	case ${1##*/} in
	cpukern.[ch]) echo 1 ;;
	model.h) echo 2 ;;
	layout.[ch]) echo 3 ;;
	step.[ch]) echo 4 ;;
	model.c | modelint.h) echo 5 ;;
	modelhvp.[ch]) echo 6 ;;
	esac
}

# reaches_up DIR: "FILE includes NAME, a higher floor" for each include
# of a file of DIR that names one of DIR above its own; status 1 if any
reaches_up() {
	bad=0
	for f in "$1"/cpukern.[ch] "$1"/model.[ch] "$1"/modelint.h "$1"/layout.[ch] \
		"$1"/step.[ch] "$1"/modelhvp.[ch]; do
		test -f "$f" || continue
		me=$(floor "$f")
		sed -n 's/^[ 	]*#[ 	]*include[ 	]*"\([^"/]*\)".*/\1/p' "$f" >incs
		while read -r inc; do
			up=$(floor "$inc")
			if test -n "$up" && test "$up" -gt "$me"; then
				echo "${f##*/} includes $inc, a higher floor" && bad=1
			fi
		done <incs
	done
	return $bad
}

test_expect_success 'every file of the floors is there' '
	for f in cpukern.c cpukern.h model.h layout.c layout.h step.c step.h model.c \
		modelint.h modelhvp.c modelhvp.h; do
		test -f "$SW_TOP/lib/model/$f" || return 1
	done
'

test_expect_success 'no file of lib/model/ includes one of a higher floor' '
	reaches_up "$SW_TOP/lib/model" >found &&
	test_line_count = 0 found
'

test_expect_success 'the check sees the kernels reach up (cpukern.c -> step.h, modelint.h)' '
	mkdir up &&
	printf "#include \"cpukern.h\"\n#include \"step.h\"\n#include \"../base/par.h\"\n" >up/cpukern.c &&
	printf "#include \"model.h\"\n#include \"layout.h\"\n" >up/step.h &&
	printf "#include \"modelint.h\"\n" >>up/cpukern.c &&
	test_expect_code 1 reaches_up up >found &&
	echo "cpukern.c includes step.h, a higher floor" >expect &&
	echo "cpukern.c includes modelint.h, a higher floor" >>expect &&
	test_cmp expect found
'

test_done
