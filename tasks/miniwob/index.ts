export * from './spec';
export * from './oracles';
export * from './suite';
