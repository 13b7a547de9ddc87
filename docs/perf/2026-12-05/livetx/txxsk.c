// Comparison for txlive: the same frames sent by a copy-mode AF_XDP socket
// (one sendto per batch, an skb per frame in the kernel).
// usage: txxsk IFNAME FRAMES BATCH FRAMELEN   (counts with txlive's sink on the peer)
#define _GNU_SOURCE
#include <linux/if_xdp.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <unistd.h>
#ifndef SOL_XDP
#define SOL_XDP 283
#endif
#define NF 4096
#define FS 2048
#define RS 2048
static double now(clockid_t c){struct timespec t;clock_gettime(c,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  const char*ifn=argv[1]; long frames=atol(argv[2]); int batch=atoi(argv[3]); int flen=atoi(argv[4]);
  cpu_set_t cs; CPU_ZERO(&cs); CPU_SET(1,&cs); sched_setaffinity(0,sizeof cs,&cs);
  int fd=socket(AF_XDP,SOCK_RAW,0); if(fd<0){perror("socket");return 1;}
  unsigned char*um=mmap(NULL,(size_t)NF*FS,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS|MAP_POPULATE,-1,0);
  struct xdp_umem_reg mr={.addr=(unsigned long)um,.len=(unsigned long)NF*FS,.chunk_size=FS,.headroom=0};
  if(setsockopt(fd,SOL_XDP,XDP_UMEM_REG,&mr,sizeof mr)){perror("umem");return 1;}
  int rs=RS; setsockopt(fd,SOL_XDP,XDP_UMEM_FILL_RING,&rs,sizeof rs); setsockopt(fd,SOL_XDP,XDP_UMEM_COMPLETION_RING,&rs,sizeof rs);
  setsockopt(fd,SOL_XDP,XDP_TX_RING,&rs,sizeof rs);
  int budget=512; if(setsockopt(fd,SOL_XDP,9 /*XDP_MAX_TX_SKB_BUDGET, 6.17+*/,&budget,sizeof budget)) perror("XDP_MAX_TX_SKB_BUDGET");
  struct xdp_mmap_offsets off; socklen_t ol=sizeof off; if(getsockopt(fd,SOL_XDP,XDP_MMAP_OFFSETS,&off,&ol)){perror("off");return 1;}
  char*tx=mmap(NULL,off.tx.desc+RS*sizeof(struct xdp_desc),PROT_READ|PROT_WRITE,MAP_SHARED|MAP_POPULATE,fd,XDP_PGOFF_TX_RING);
  char*cq=mmap(NULL,off.cr.desc+RS*sizeof(__u64),PROT_READ|PROT_WRITE,MAP_SHARED|MAP_POPULATE,fd,XDP_UMEM_PGOFF_COMPLETION_RING);
  if(tx==MAP_FAILED||cq==MAP_FAILED){perror("mmap");return 1;}
  volatile __u32*txp=(void*)(tx+off.tx.producer),*txc=(void*)(tx+off.tx.consumer); struct xdp_desc*txd=(void*)(tx+off.tx.desc);
  volatile __u32*cqp=(void*)(cq+off.cr.producer),*cqc=(void*)(cq+off.cr.consumer);
  struct sockaddr_xdp sa={.sxdp_family=AF_XDP,.sxdp_ifindex=if_nametoindex(ifn),.sxdp_queue_id=0,.sxdp_flags=XDP_COPY};
  if(bind(fd,(void*)&sa,sizeof sa)){perror("bind");return 1;}
  for(int f=0;f<NF;f++){unsigned char*p=um+(size_t)f*FS; memset(p,0,FS); memset(p,0xff,6); p[6]=2; p[12]=8; p[14]=0x45; p[33]=f;}
  unsigned free_head=0, inflight=0; long sent=0, kicks=0;
  double w0=now(CLOCK_MONOTONIC), c0=now(CLOCK_THREAD_CPUTIME_ID);
  while(sent<frames){
    // reclaim
    __u32 cp=__atomic_load_n(cqp,__ATOMIC_ACQUIRE), cc=*cqc; inflight-=cp-cc; __atomic_store_n(cqc,cp,__ATOMIC_RELEASE);
    if(inflight+batch>RS){ sendto(fd,NULL,0,MSG_DONTWAIT,NULL,0); kicks++; continue; }
    __u32 p=*txp;
    for(int k=0;k<batch;k++){ struct xdp_desc*d=&txd[(p+k)&(RS-1)]; d->addr=(__u64)((free_head++)&(NF-1))*FS; d->len=flen; d->options=0; }
    __atomic_store_n(txp,p+batch,__ATOMIC_RELEASE); inflight+=batch; sent+=batch;
    sendto(fd,NULL,0,MSG_DONTWAIT,NULL,0); kicks++;
  }
  double w1=now(CLOCK_MONOTONIC), c1=now(CLOCK_THREAD_CPUTIME_ID);
  printf("xsk copy frames %ld len %d batch %d: %.1f ns CPU/frame, %.2f Mpps wall, %ld sendto\n",sent,flen,batch,(c1-c0)*1e9/sent,sent/(w1-w0)/1e6,kicks);
  return 0;
}
