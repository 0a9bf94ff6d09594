# Hadoop flow sizes: Facebook's Hadoop cluster (A. Roy et al., "Inside the
# Social Network's (Datacenter) Network", SIGCOMM 2015), as
# tabulated in the HPCC ns-3 repository
# (alibaba-edu/High-Precision-Congestion-Control,
# traffic_gen/FbHdp_distribution.txt) and used by the HPCC evaluation.
#
# Format: flow size in bytes, cumulative percentage. Sizes between points
# are interpolated linearly (HPCC traffic_gen/custom_rand.py).
# Mean 120421 B (about 0.12 MB); 60% of flows are at most 1000 B.
0 0
100 1
200 2
300 5
350 15
400 20
500 30
600 40
700 50
1000 60
2000 67
7000 70
30000 72
50000 82
80000 87
120000 90
300000 95
1000000 97.5
2000000 99
10000000 100
