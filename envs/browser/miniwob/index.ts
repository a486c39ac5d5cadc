export * from './package';
export * from './page';
export * from './serve';
