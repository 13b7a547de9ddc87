#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#include <sys/mman.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(){
  size_t sizes[]={256<<10,1<<20,2<<20,4<<20,8<<20,16<<20,32<<20,64<<20,256<<20};
  for(int s=0;s<9;s++){
    size_t n=sizes[s]/64; 
    uint64_t *a=aligned_alloc(2<<20,sizes[s]); madvise(a,sizes[s],MADV_HUGEPAGE);
    size_t *perm=malloc(n*sizeof(size_t)); for(size_t i=0;i<n;i++)perm[i]=i;
    for(size_t i=n-1;i>0;i--){size_t j=rand()%(i+1);size_t t=perm[i];perm[i]=perm[j];perm[j]=t;}
    for(size_t i=0;i<n;i++) a[perm[i]*8]=perm[(i+1)%n]*8;
    size_t p=0; long iters=20000000; double t0=now();
    for(long i=0;i<iters;i++) p=a[p];
    double t=now()-t0;
    printf("%6zu KiB: %.1f ns/load (%zu)\n",sizes[s]>>10,t/iters*1e9,p&1);
    free(a);free(perm);
  }
}
