// usage: txlive IFINDEX_A IFINDEX_B FRAMES BATCH FRAMELEN
#define _GNU_SOURCE
#include <bpf/libbpf.h>
#include <bpf/bpf.h>
#include <linux/if_link.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>
#define SLOTS 256
struct slot { unsigned len, pad; unsigned char data[2040]; };
static double now(clockid_t c){struct timespec t;clock_gettime(c,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  int ia=atoi(argv[1]), ib=atoi(argv[2]); long frames=atol(argv[3]); int batch=atoi(argv[4]); int flen=atoi(argv[5]);
  cpu_set_t cs; CPU_ZERO(&cs); CPU_SET(1,&cs); sched_setaffinity(0,sizeof cs,&cs);
  struct bpf_object*o=bpf_object__open_file("txlive.bpf.o",NULL); if(!o||bpf_object__load(o)){fprintf(stderr,"load\n");return 1;}
  int tx=bpf_program__fd(bpf_object__find_program_by_name(o,"txlive"));
  int sk=bpf_program__fd(bpf_object__find_program_by_name(o,"sink"));
  if(bpf_xdp_attach(ib,sk,XDP_FLAGS_DRV_MODE,NULL)){perror("attach sink");return 1;}
  if(getenv("PARK")){int ip=atoi(getenv("PARK")); if(bpf_xdp_attach(ip,tx,XDP_FLAGS_DRV_MODE,NULL)){perror("attach park");return 1;}}
  int rfd=bpf_map__fd(bpf_object__find_map_by_name(o,"ring")), pfd=bpf_map__fd(bpf_object__find_map_by_name(o,"pos"));
  struct slot*ring=mmap(NULL,sizeof(struct slot)*SLOTS,PROT_READ|PROT_WRITE,MAP_SHARED,rfd,0);
  unsigned long long*pos=mmap(NULL,4096,PROT_READ|PROT_WRITE,MAP_SHARED,pfd,0);
  if(ring==MAP_FAILED||pos==MAP_FAILED){perror("mmap");return 1;}
  unsigned char src[64][2048];
  for(int f=0;f<64;f++){memset(src[f],0,2048); memset(src[f],0xff,6); src[f][6]=2; src[f][12]=8; src[f][13]=0; src[f][14]=0x45; src[f][20+14-1]=f;}
  unsigned char din[1514]; memset(din,0,sizeof din);
  struct xdp_md ctx={.data_end=sizeof din,.ingress_ifindex=ia};
  LIBBPF_OPTS(bpf_test_run_opts,opts,.data_in=din,.data_size_in=sizeof din,.ctx_in=&ctx,.ctx_size_in=sizeof ctx,.flags=BPF_F_TEST_XDP_LIVE_FRAMES,.repeat=batch,.batch_size=getenv("BS")?atoi(getenv("BS")):0);
  long sent=0; unsigned long long p0=pos[1];
  if(getenv("WAIT")){ struct timespec t2={1,0}; nanosleep(&t2,NULL);} double w0=now(CLOCK_MONOTONIC), c0=now(CLOCK_THREAD_CPUTIME_ID);
  while(sent<frames){
    unsigned base=(unsigned)pos[0];
    for(int k=0;k<batch;k++){struct slot*s=&ring[(base+k)&(SLOTS-1)]; s->len=flen; memcpy(s->data,src[k&63],flen);}
    if(bpf_prog_test_run_opts(tx,&opts)){perror("test_run");return 1;}
    sent+=batch;
  }
  double w1=now(CLOCK_MONOTONIC), c1=now(CLOCK_THREAD_CPUTIME_ID);
  struct timespec ts={0,200000000}; nanosleep(&ts,NULL);
  unsigned long long got=pos[1]-p0;
  printf("frames %ld len %d batch %d: %.1f ns CPU/frame, %.2f Mpps wall, sink got %llu (%.3f%%)\n",sent,flen,batch,(c1-c0)*1e9/sent,sent/(w1-w0)/1e6,got,100.0*got/sent);
  if(!getenv("KEEP")) bpf_xdp_detach(ib,XDP_FLAGS_DRV_MODE,NULL);
  return 0;
}
