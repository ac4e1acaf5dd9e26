# Float64 numpy rendering of the so2_mixing_stack math in docs/specs/so2_mixing_stack.md:
# forward, relay-order backward, grad_alpha identity and weight gradients, each
# checked against central finite differences. A reading aid for the spec;
# run: python3 docs/specs/so2_mixing_stack_numpy_spec.py (needs numpy only).
import numpy as np
rng = np.random.default_rng(0)
F, E, L, Cf, NG = 2, 5, 2, 3, 2
M0, M1 = (L+1)*Cf, 2*L*Cf; ROW = M0+M1; LG = L*Cf
sigm = lambda x: 1/(1+np.exp(-x))
u0 = rng.normal(size=(F,E,ROW))*0.5
alpha = rng.random((E,F))+0.2
W0 = rng.normal(size=(NG+1,F,M0,M0))*0.3
W1 = rng.normal(size=(NG+1,F,M1,M1))*0.3
G  = rng.normal(size=(NG,F,Cf,LG))*0.3
def fwd(u0, alpha, apply_alpha=True):
    u = u0.copy(); zs=[]
    for l in range(NG):
        z0 = u[:,:,:M0] @ W0[l]; z1 = u[:,:,M0:] @ W1[l]; zs.append(np.concatenate([z0,z1],-1))
        s = z0[:,:,:Cf]; sig = sigm(s @ G[l])
        act = np.concatenate([s*sigm(s), z0[:,:,Cf:]*sig, z1*np.concatenate([sig,sig],-1)],-1)
        u = u + act
    uf = u
    y = u + np.concatenate([u[:,:,:M0]@W0[NG], u[:,:,M0:]@W1[NG]],-1)
    if apply_alpha: y = y*alpha.T[:,:,None]
    return y.transpose(1,0,2), np.stack(zs), uf
def bwd(gout, out, z_all, alpha, apply_alpha=True):
    g_edge = gout.copy()
    if apply_alpha:
        galpha = (g_edge*out).sum(-1)/alpha; g_edge = g_edge*alpha[:,:,None]
    else: galpha = np.zeros_like(alpha)
    g = g_edge.transpose(1,0,2)
    g_cur = g + np.concatenate([g[:,:,:M0]@W0[NG].transpose(0,2,1), g[:,:,M0:]@W1[NG].transpose(0,2,1)],-1)
    for l in range(NG-1,-1,-1):
        z = z_all[l]; s = z[:,:,:Cf]; s0 = sigm(s); sig = sigm(s@G[l])
        gz_s = g_cur[:,:,:Cf]*s0*(1+s*(1-s0))
        gz_m0 = g_cur[:,:,Cf:M0]*sig
        gz_m1 = g_cur[:,:,M0:]*np.concatenate([sig,sig],-1)
        gsig = g_cur[:,:,Cf:M0]*z[:,:,Cf:M0] + (g_cur[:,:,M0:]*z[:,:,M0:]).reshape(F,E,2,LG).sum(2)
        glog = gsig*sig*(1-sig)
        gz_s = gz_s + glog @ G[l].transpose(0,2,1)
        gz = np.concatenate([gz_s,gz_m0,gz_m1],-1)
        g_cur = g_cur + np.concatenate([gz[:,:,:M0]@W0[l].transpose(0,2,1), gz[:,:,M0:]@W1[l].transpose(0,2,1)],-1)
    return g_cur, galpha
out, z_all, uf = fwd(u0, alpha)
gout = rng.normal(size=out.shape)
gu, ga = bwd(gout, out, z_all, alpha)
# finite differences
eps=1e-6; num_u=np.zeros_like(u0); num_a=np.zeros_like(alpha)
for idx in np.ndindex(u0.shape):
    d=np.zeros_like(u0); d[idx]=eps
    num_u[idx]=((fwd(u0+d,alpha)[0]*gout).sum()-(fwd(u0-d,alpha)[0]*gout).sum())/(2*eps)
for idx in np.ndindex(alpha.shape):
    d=np.zeros_like(alpha); d[idx]=eps
    num_a[idx]=((fwd(u0,alpha+d)[0]*gout).sum()-(fwd(u0,alpha-d)[0]*gout).sum())/(2*eps)
print("max |grad_u0 - FD|", np.abs(gu-num_u).max(), "scale", np.abs(num_u).max())
print("max |grad_alpha - FD|", np.abs(ga-num_a).max(), "scale", np.abs(num_a).max())
# recovery check u_l = u_{l+1} - act(z_l)
# weight gradients with input recovery
def wgrads(gout, out, z_all, uf, alpha):
    g = (gout*alpha[:,:,None]).transpose(1,0,2)
    gW0=np.zeros_like(W0); gW1=np.zeros_like(W1); gG=np.zeros_like(G)
    gW0[NG]=uf[:,:,:M0].transpose(0,2,1)@g[:,:,:M0]; gW1[NG]=uf[:,:,M0:].transpose(0,2,1)@g[:,:,M0:]
    g_cur = g + np.concatenate([g[:,:,:M0]@W0[NG].transpose(0,2,1), g[:,:,M0:]@W1[NG].transpose(0,2,1)],-1)
    u_next = uf
    for l in range(NG-1,-1,-1):
        z=z_all[l]; s=z[:,:,:Cf]; s0=sigm(s); sig=sigm(s@G[l]); sig2=np.concatenate([sig,sig],-1)
        gz_s=g_cur[:,:,:Cf]*s0*(1+s*(1-s0)); gz_m0=g_cur[:,:,Cf:M0]*sig; gz_m1=g_cur[:,:,M0:]*sig2
        gsig=g_cur[:,:,Cf:M0]*z[:,:,Cf:M0]+(g_cur[:,:,M0:]*z[:,:,M0:]).reshape(F,E,2,LG).sum(2)
        glog=gsig*sig*(1-sig); gz_s=gz_s+glog@G[l].transpose(0,2,1)
        gz=np.concatenate([gz_s,gz_m0,gz_m1],-1)
        act=np.concatenate([s*s0, z[:,:,Cf:M0]*sig, z[:,:,M0:]*sig2],-1)
        u_l = u_next - act
        gW0[l]=u_l[:,:,:M0].transpose(0,2,1)@gz[:,:,:M0]; gW1[l]=u_l[:,:,M0:].transpose(0,2,1)@gz[:,:,M0:]
        gG[l]=s.transpose(0,2,1)@glog
        g_cur = g_cur + np.concatenate([gz[:,:,:M0]@W0[l].transpose(0,2,1), gz[:,:,M0:]@W1[l].transpose(0,2,1)],-1)
        u_next=u_l
    return gW0,gW1,gG
gW0,gW1,gG = wgrads(gout,out,z_all,uf,alpha)
def fdw(Warr, gW, n=25):
    errs=[]; 
    for _ in range(n):
        idx=tuple(rng.integers(0,s) for s in Warr.shape); old=Warr[idx]
        Warr[idx]=old+eps; fp=(fwd(u0,alpha)[0]*gout).sum()
        Warr[idx]=old-eps; fm=(fwd(u0,alpha)[0]*gout).sum(); Warr[idx]=old
        errs.append(abs((fp-fm)/(2*eps)-gW[idx]))
    return max(errs)
print("W0 FD err", fdw(W0,gW0), "W1 FD err", fdw(W1,gW1), "G FD err", fdw(G,gG))
