entry=(gpuscan-server)
env=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin GPUSCAN_ADDRESS=0.0.0.0:50051 GPUSCAN_METRICS_ADDRESS=0.0.0.0:9090)
user=10001:10001
