#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#include <sys/mman.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  size_t sz=(size_t)atoi(argv[1])<<20; size_t n=sz/64;
  uint64_t *a=aligned_alloc(2<<20,sz); madvise(a,sz,MADV_HUGEPAGE);
  size_t *perm=malloc(n*sizeof(size_t)); for(size_t i=0;i<n;i++)perm[i]=i;
  for(size_t i=n-1;i>0;i--){size_t j=rand()%(i+1);size_t t=perm[i];perm[i]=perm[j];perm[j]=t;}
  for(size_t i=0;i<n;i++) a[perm[i]*8]=perm[(i+1)%n]*8;
  for(int ch=1;ch<=32;ch*=2){
    size_t p[32]; for(int c=0;c<ch;c++)p[c]=perm[(n/ch)*c]*8;
    long iters=4000000; double t0=now();
    for(long i=0;i<iters;i++) for(int c=0;c<ch;c++) p[c]=a[p[c]];
    double t=now()-t0; size_t s=0; for(int c=0;c<ch;c++)s+=p[c];
    printf("%zu MiB chains %2d: %.1f ns/load (%zu)\n",sz>>20,ch,t/iters/ch*1e9,s&1);
  }
}
