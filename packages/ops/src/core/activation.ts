/** The fused activations of the linear family, shared by its CPU references and its CUDA dispatch. */

/** Every fused activation an op accepts (`linear`'s epilogue). */
export type Activation = 'none' | 'silu' | 'gelu' | 'gelu_tanh';
