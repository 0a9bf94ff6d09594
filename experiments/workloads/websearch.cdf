# Web search flow sizes: DCTCP paper (M. Alizadeh et al., "Data Center TCP
# (DCTCP)", SIGCOMM 2010: query + background traffic of a
# production web-search cluster), as tabulated in the HPCC ns-3 repository
# (alibaba-edu/High-Precision-Congestion-Control,
# traffic_gen/WebSearch_distribution.txt) and used by the DCQCN and HPCC
# evaluations.
#
# Format: flow size in bytes, cumulative percentage. Sizes between points
# are interpolated linearly (HPCC traffic_gen/custom_rand.py).
# Mean 1711250 B (about 1.7 MB).
0 0
10000 15
20000 20
30000 30
50000 40
80000 53
200000 60
1000000 70
2000000 80
5000000 90
10000000 97
30000000 100
