# Shared by the bench scripts that summarise runs: source it (no side effects).
# median: the median of the numbers on stdin, one a line ("n/a" when there are none; the mean of
# the two middle ones, to one decimal, for an even count).
median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) {print "n/a"} else if (NR%2) {print a[(NR+1)/2]} else {printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2}}'; }
