# SPDX-License-Identifier: MIT
# bench/recovery/plot.gp: recovery.png from recovery-plot.dat (bench/recovery/report.py):
# per case, the ranks, the recovery and the fresh start in ms. gnuplot -e "data='...';
# output='...'" plot.gp
set terminal pngcairo size 900,520 noenhanced
set output output
set title "From a SIGKILL to the all-to-all running again, beside a fresh start"
set xlabel "ranks"
set ylabel "ms (log)"
set logscale xy
set key outside right
set grid
plot data using 1:2 with points pointtype 7 pointsize 1.4 title "recovery", \
     data using 1:3 with points pointtype 5 pointsize 1.4 title "fresh start"
